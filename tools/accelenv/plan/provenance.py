"""Where each pin of a lock came from, and whether the files its hashes name were checked.

`accelenv lock` asks uv for two things besides the lock body: the index each pin was taken from (uv's
`--emit-index-annotation`, a `    # from <index url>` line in each pin's block) and, per platform, the files the
platform can install with their URLs (`--format pylock.toml`). The lock keeps the hashes of those files only
(a GPU wheel has dozens of builds for other Pythons and systems, none of which an image of the environment can
install), and one header line says whether each was downloaded and its sha256 checked (`plan.digests`) or
taken from the index's answer as it was (`lock --no-verify`).

`assess` reads a lock's text (untrusted: a hand edit, a merge) against the indexes the environment declares,
offline, for `lock --check` and `validate`; it and everything else here is pure. `audit.py` reads the
repository's locks (through `plan.lock.read_lock`) and assesses each.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Iterable


HASHES_VERIFIED = "# hashes: verified: accelenv lock downloaded every file named here and checked its sha256"
HASHES_UNVERIFIED = (
    "# hashes: UNVERIFIED: taken from the indexes' answers, the files not downloaded (accelenv lock --no-verify); "
    "check them: {command}"
)


def hashes_line(env_id: str, *, verified: bool) -> str:
    """The header line that says whether the lock's files were checked (`env_id`: for the command that does)."""
    return HASHES_VERIFIED if verified else HASHES_UNVERIFIED.format(command=relock(env_id))


def relock(env_id: str) -> str:
    """The command that makes a lock again, recording what this module reads (`env_id` "": the image lock)."""
    return f"accelenv lock {env_id} --force" if env_id else "accelenv lock --force"


_HASHES = re.compile(r"^# hashes: (verified|UNVERIFIED):", re.MULTILINE)
_REQUIREMENT = re.compile(r"\A(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==(?P<version>[A-Za-z0-9.+!_-]+)\Z")
_HASH = re.compile(r"\A {4}--hash=sha256:(?P<digest>[0-9a-f]{64})(?: \\)?\r?\Z")
_FROM = re.compile(r"\A {4}# from (?P<index>https?://[!-~]+)\r?\Z")
_URL = re.compile(r"\Ahttps?://[!-~]+\Z")
_SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")


class Provenance(StrEnum):
    """What a lock says about where its pins came from."""

    DECLARED = "declared"  # every pin names its index, and the environment declares each of them
    UNDECLARED = "undeclared"  # a pin came from an index the environment does not declare: refused
    INCOMPLETE = "incomplete"  # some pins name their index, others not (an edited or merged lock): refused
    NOT_RECORDED = "not-recorded"  # no pin names its index: a lock made before accelenv recorded them


class Hashes(StrEnum):
    """What a lock says about its hashes."""

    VERIFIED = "verified"  # every file downloaded and checked when the lock was made
    UNVERIFIED = "unverified"  # taken from the indexes' answers (lock --no-verify)
    NOT_RECORDED = "not-recorded"  # a lock made before accelenv checked them


@frozen
class Pin:
    """One `name==version` of a lock, with the index it names (None: no `# from` line) and its line number."""

    name: str  # canonical
    version: str
    index: str | None
    hashes: tuple[str, ...]
    line: int


@frozen
class LockProvenance:
    """A lock's pins and what they say: `problems` are errors (a pin from an undeclared index, a pin that names
    none in a lock where the others do), each naming the package and the index or line."""

    provenance: Provenance
    hashes: Hashes
    pins: tuple[Pin, ...]
    problems: tuple[str, ...]

    @property
    def is_error(self) -> bool:
        return bool(self.problems)

    @property
    def shortfall(self) -> tuple[str, str] | None:
        """What a lock that says too little to be trusted blindly does not record, and why (None: it says
        enough)."""
        if self.provenance is Provenance.NOT_RECORDED or self.hashes is Hashes.NOT_RECORDED:
            return "no recorded provenance", _NOT_RECORDED
        if self.hashes is Hashes.UNVERIFIED:
            return "no checked hashes", _UNVERIFIED
        return None

    def warning(self, fix: str) -> str | None:
        """`lock --check`'s warning (`fix`: the command that mends it), or None."""
        match self.shortfall:
            case None:
                return None
            case ("no recorded provenance", why):
                return f"provenance not recorded: {why}; record it: {fix}"
            case (_, why):
                return f"hashes not checked: {why}; check them: {fix}"


_NOT_RECORDED = (
    "the lock names no index per package and does not say whether its files were checked, as it was made before "
    "accelenv recorded either"
)
_UNVERIFIED = (
    "its hashes were taken from the indexes' answers without downloading the files, as it was locked with --no-verify"
)


@frozen
class LockedFile:
    """One file a platform can install, as uv's pylock.toml names it."""

    name: str  # canonical
    version: str
    url: str
    sha256: str
    size: int | None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1].split("#", 1)[0].split("?", 1)[0]


# ---------------------------------------------------------------------------------------------------- reading


def normal_index(url: str) -> str:
    """An index URL as compared: without a trailing slash, scheme and host in lower case."""
    scheme, sep, rest = url.rstrip("/").partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}{sep}{host.lower()}{slash}{path}"


def hashes_state(text: str) -> Hashes:
    match = _HASHES.search(text)
    if match is None:
        return Hashes.NOT_RECORDED
    return Hashes.VERIFIED if match.group(1) == "verified" else Hashes.UNVERIFIED


def pins_of(text: str) -> tuple[Pin, ...]:
    """The pins of a lock (uv's requirements format, as `accelenv lock` writes it), each with its index and
    hashes. A line that is neither an option, a comment, a pin nor part of a pin's block is skipped: `lock
    --check` judges the pins it can read, and pip refuses the rest when it installs."""
    blocks: list[tuple[int, re.Match[str], list[str]]] = []
    inside = False  # in the block of the last pin read
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith(("#", "--")):
            continue
        if not line.startswith(" "):
            match = _REQUIREMENT.match(line.split(" \\")[0].split(";")[0].strip())
            inside = match is not None
            if match is not None:
                blocks.append((number, match, []))
        elif inside:
            blocks[-1][2].append(line)
    return tuple(_pin(number, match, lines) for number, match, lines in blocks)


def _pin(number: int, match: re.Match[str], lines: list[str]) -> Pin:
    hashes = [found["digest"] for line in lines if (found := _HASH.match(line))]
    indexes = [found["index"] for line in lines if (found := _FROM.match(line))]
    return Pin(
        name=canonicalize_name(match["name"]),
        version=match["version"],
        index=indexes[-1] if len(indexes) == 1 else None,  # two `# from` lines: no one index to judge
        hashes=tuple(hashes),
        line=number,
    )


def assess(text: str, declared: Iterable[str], *, where: str, env_id: str) -> LockProvenance:
    """What the lock `text` (the file `where`, of environment `env_id`) says about its pins' indexes and hashes,
    judged against the indexes the environment declares."""
    from accelenv.redact import redact_text, terminal_safe

    allowed = {normal_index(url) for url in declared}
    owner = env_id or "the image lock"
    pins = pins_of(text)
    named = [pin for pin in pins if pin.index is not None]
    problems: list[str] = []
    if not named:
        provenance = Provenance.NOT_RECORDED
    elif len(named) < len(pins):
        provenance = Provenance.INCOMPLETE
        problems += [
            f"{where}:{pin.line}: {pin.name}=={pin.version} names no one index (its `# from` line is missing or "
            "repeated) where the other pins name theirs: the lock was edited by hand or merged; make it again: "
            + relock(env_id)
            for pin in pins
            if pin.index is None
        ]
    else:
        provenance = Provenance.DECLARED
    for pin in named:
        if pin.index is not None and normal_index(pin.index) not in allowed:
            provenance = Provenance.UNDECLARED
            shown = terminal_safe(redact_text(pin.index))
            problems.append(
                f"{where}:{pin.line}: {pin.name}=={pin.version} came from {shown}, an index {owner} does not "
                f"declare (it declares {', '.join(sorted(allowed))}); declare that index in matrix.toml if it is "
                "meant, or make the lock again from the declared ones: " + relock(env_id)
            )
    return LockProvenance(provenance=provenance, hashes=hashes_state(text), pins=pins, problems=tuple(problems))


# ---------------------------------------------------------------------------------------------------- making


def parse_pylock(text: str) -> tuple[LockedFile, ...]:
    """The files (wheels and sdists, with URL and sha256) of uv's `--format pylock.toml` output. ValueError when
    it is not that, or names a file without an http(s) URL or a sha256."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"uv's pylock.toml does not read: {error}") from error
    packages = data.get("packages")
    if not isinstance(packages, list):
        raise ValueError("uv's pylock.toml has no [[packages]]")
    files: list[LockedFile] = []
    for package in packages:
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            raise ValueError("uv's pylock.toml has a package without a name")
        name, version = canonicalize_name(package["name"]), str(package.get("version", ""))
        wheels = package.get("wheels", [])
        entries = [*(wheels if isinstance(wheels, list) else []), *([package["sdist"]] if "sdist" in package else [])]
        for entry in entries:
            files.append(_locked_file(entry, name, version))
    return tuple(files)


def _locked_file(entry: object, name: str, version: str) -> LockedFile:
    url = entry.get("url") if isinstance(entry, dict) else None
    hashes = entry.get("hashes") if isinstance(entry, dict) else None
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    size = entry.get("size") if isinstance(entry, dict) else None
    if not isinstance(url, str) or not _URL.match(url):
        raise ValueError(f"uv names a file of {name}=={version} without an http(s) URL: {str(url)[:200]!r}")
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise ValueError(f"uv names {url} of {name}=={version} without a sha256")
    return LockedFile(
        name=name, version=version, url=url, sha256=sha256, size=size if isinstance(size, int) and size > 0 else None
    )


def keep_installable(body: str, files: Iterable[LockedFile]) -> tuple[str, tuple[LockedFile, ...]]:
    """The lock body with each pin's hashes narrowed to those of `files` (what the environment's platforms can
    install), and those files, each once: every hash the lock keeps is one of a file `accelenv lock` can check.
    ValueError when a pin keeps none."""
    pins = {(pin.name, pin.version): set(pin.hashes) for pin in pins_of(body)}
    unique = {(f.url, f.sha256): f for f in files}.values()  # a pure-Python wheel: once, not once per platform
    kept = tuple(f for f in unique if f.sha256 in pins.get((f.name, f.version), ()))
    allowed: dict[tuple[str, str], set[str]] = {}
    for file in kept:
        allowed.setdefault((file.name, file.version), set()).add(file.sha256)
    if bare := [f"{name}=={version}" for name, version in pins if (name, version) not in allowed]:
        raise ValueError(
            f"uv named no file the environment's platforms can install with a hash it pinned for {', '.join(bare)} "
            "(the index changed meanwhile?); run accelenv lock again"
        )
    lines: list[str] = []
    current: set[str] = set()
    for line in body.splitlines():
        if line and not line.startswith((" ", "#", "--")):
            match = _REQUIREMENT.match(line.split(" \\")[0].split(";")[0].strip())
            current = allowed.get((canonicalize_name(match["name"]), match["version"]), set()) if match else set()
        hashed = _HASH.match(line)
        if hashed is None or hashed["digest"] in current:
            lines.append(line)
    return "\n".join(_continuations(lines)) + "\n", kept


def _continuations(lines: list[str]) -> list[str]:
    """Each pin's requirement and hash lines joined with ` \\` up to its last hash, and not after it."""
    out = [line.removesuffix(" \\") if not line.startswith(("#", "    #")) else line for line in lines]
    for i, line in enumerate(out):
        is_pin = bool(line) and not line.startswith((" ", "#", "--"))
        if (is_pin or _HASH.match(line)) and i + 1 < len(out) and _HASH.match(out[i + 1]):
            out[i] = line + " \\"
    return out
