"""A small PNG decoder (zlib and the five scanline filters), so a test can look at a browser's screenshot without
an imaging library: 8-bit greyscale, RGB and RGBA, not interlaced (what Chromium's captureScreenshot writes)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel

Rgb = tuple[int, int, int]


@dataclass(frozen=True, kw_only=True)
class Image:
    width: int
    height: int
    channels: int
    pixels: bytes  # rows top to bottom, `channels` bytes per pixel, no filter bytes

    def rgb(self, x: int, y: int) -> Rgb:
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise IndexError(f"pixel ({x}, {y}) is outside {self.width}x{self.height}")
        i = (y * self.width + x) * self.channels
        if self.channels < 3:  # greyscale (with or without alpha)
            return self.pixels[i], self.pixels[i], self.pixels[i]
        return self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]

    def region(self, left: int, top: int, width: int, height: int) -> list[Rgb]:
        """Every pixel of a rectangle, clipped to the image."""
        xs = range(max(0, left), min(self.width, left + width))
        return [self.rgb(x, y) for y in range(max(0, top), min(self.height, top + height)) for x in xs]

    def colours(self) -> set[Rgb]:
        return {self.rgb(x, y) for y in range(self.height) for x in range(self.width)}


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(data: bytes) -> Image:
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG: the signature is missing")
    pos, idat, header = len(SIGNATURE), bytearray(), None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])[0]:
            raise ValueError(f"chunk {kind!r} has a bad CRC")
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = CHANNELS[colour]
    stride = width * bpp
    raw = zlib.decompress(bytes(idat))
    out = bytearray()
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
            elif kind != 0:
                raise ValueError(f"row {y} has unknown filter {kind}")
        out += line
        previous = line
    return Image(width=width, height=height, channels=bpp, pixels=bytes(out))


def encode(width: int, height: int, rows: list[list[Rgb]]) -> bytes:
    """An RGB PNG (filter 0 on every row): for the decoder's own tests."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    raw = b"".join(b"\x00" + bytes(v for px in row for v in px) for row in rows)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
