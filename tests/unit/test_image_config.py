"""The image config made canonical, and the archives that carry it from and to the engine: pure, no engine.

CONFIG is the config Docker 20.10.24's classic builder wrote for the CI test image (tests/integration/
test_docker_images.py: ci-image on accelenv-ci/debian:bookworm-minbase), taken from `docker save` on 2026-11-30;
shortened where noted, its keys in the engine's order. `rebuilt()` is what a second build of the same inputs
writes: the same layers, other times, another build container and intermediate image.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from typing import TYPE_CHECKING, Any

import pytest

from accelenv.build.image_config import (
    MAX_CONFIG,
    config_archive,
    config_from_archive,
    image_id,
    normalise,
)
from accelenv.timestamps import rfc3339, rfc3339_seconds

if TYPE_CHECKING:
    from collections.abc import Iterator

EPOCH = 1796073871  # SOURCE_DATE_EPOCH: the base image's creation time, 2026-11-30T21:24:31.241272566Z
LABELS = {
    "dev.accelenv.env": "ci-image",
    "dev.accelenv.env-hash": "sha256:35f0bfe796fe67275cf44b28d9f24da3fdf69f73f715834e5bc975fdcbd95c50",
    "org.opencontainers.image.title": "accelenv ci-image",
}  # 3 of its 11 labels
ENV = [
    "PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "DEBIAN_FRONTEND=noninteractive",
    "VIRTUAL_ENV=/opt/venv",
    "ACCELENV_ENV=ci-image",
]  # 4 of its 8 variables


def _settings(image: str, hostname: str = "", cmd: list[str] | None = None) -> dict[str, Any]:
    return {
        "Hostname": hostname,
        "Domainname": "",
        "User": "accelenv",
        "AttachStdin": False,
        "AttachStdout": False,
        "AttachStderr": False,
        "Tty": False,
        "OpenStdin": False,
        "StdinOnce": False,
        "Env": ENV,
        "Cmd": cmd or ["accelenv", "check", "ci-image"],
        "Image": image,
        "Volumes": None,
        "WorkingDir": "/workspace",
        "Entrypoint": None,
        "OnBuild": None,
        "Labels": LABELS,
    }


DIFF_IDS = [
    "sha256:2255c9a5999075d115a46c57d42007b9c40da54b0f22acef2d2caf4cf939a62d",
    "sha256:9ee9e9132da027b1dbe0a14a4c2074388bf2af33d8b2257ff0c30b9606e43170",
    "sha256:a7ef63278106c18f8a4f2eaef61a381d5666fd3e490ff5b3a4910e2b76af7a96",
    "sha256:da7aef5d03f425b2c792c83b47db4fc111fec2f992bb853a025783219f3befea",
    "sha256:9ceff81dc555058c34bcf076e0f3853aa1133eaa0de13284b4adabab2e0bea7e",
    "sha256:dfcddbcba0ebe074a0515d5bacc7f3d7f5a9b6a8b979a7de36948a7538709600",
]
NOP = "/bin/sh -c #(nop) "
STEPS = [  # (created_by, empty_layer) of every build step; the RUN and LABEL lines are shortened
    (f"{NOP} ARG SOURCE_DATE_EPOCH", True),
    (f"{NOP} ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1", True),
    (f"{NOP}COPY dir:944fa63abafff8c7e8d5ecd5fc0a75e1caff8d154e3b9a4531e349d5ad78cc29 in / ", False),
    ("|1 SOURCE_DATE_EPOCH=1796073871 /bin/sh -c useradd --create-home --uid 1000 accelenv", False),
    (f"{NOP}COPY dir:e916fd068c3d6e5abc95b21654e30e83366e5d64194c505d6fff296970c32024 in / ", False),
    (f"{NOP}COPY dir:53c0339748a0234c6816ca69e54501ba8c77bb00f37af336fcdc8cbf54405c4c in / ", False),
    (f"{NOP}COPY dir:d1e71278b23fa411b31f73016a7ec4a83a6fa17611a7600015c888bff5252b56 in / ", False),
    (f"{NOP} ENV ACCELENV_ENV=ci-image", True),
    (f"{NOP} USER accelenv", True),
    (f"{NOP}WORKDIR /workspace", True),
    (f"{NOP} LABEL dev.accelenv.env=ci-image", True),
    (f'{NOP} CMD ["accelenv" "check" "ci-image"]', True),
]


def config(
    *, built: str = "2026-11-30T23:15:38.83131877Z", container: str = "194810e522af", parent: str = "f175f7df4158"
) -> dict[str, Any]:
    """The builder's config, every step stamped `built` (the real one has a time per step, all after the base)."""
    last = f"sha256:{parent}e5f3f764aa212e5ff4a2e906658fc0c549059e17ee14b43416e8"
    history: list[dict[str, Any]] = [{"created": "2026-11-30T21:24:31.241272566Z", "comment": "Imported from -"}]
    for created_by, empty in STEPS:
        history.append({"created": built, "created_by": created_by, **({"empty_layer": True} if empty else {})})
    return {
        "architecture": "amd64",
        "config": _settings(last),
        "container": f"{container}cdbd63d678a4f7f7616925b659071d3780950bc13fdebc111291",
        "container_config": _settings(last, container, ["/bin/sh", "-c", "#(nop) ", STEPS[-1][0].split(") ")[-1]]),
        "created": built,
        "docker_version": "20.10.24+dfsg1",
        "history": history,
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": DIFF_IDS},
    }


def encoded(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def rebuilt() -> dict[str, Any]:
    return config(built="2026-12-01T08:00:01.5Z", container="0123456789ab", parent="aaaaaaaaaaaa")


# ---------------------------------------------------------------------------------------------------- normalise


def test_the_builders_times_container_and_engine_go_the_image_stays() -> None:
    before = config()
    after = json.loads(normalise(encoded(before), epoch=EPOCH))
    assert after["created"] == "2026-11-30T21:24:31Z"
    assert "container" not in after
    assert "container_config" not in after
    assert "docker_version" not in after
    assert after["config"] == {**before["config"], "Image": ""}  # user, env, command, working dir, labels kept
    assert after["config"]["Labels"] == LABELS
    assert after["rootfs"] == before["rootfs"]
    assert (after["os"], after["architecture"]) == ("linux", "amd64")
    # the base's entry keeps its own time (it is not later than the epoch); every build step gets the epoch
    assert after["history"][0] == before["history"][0]
    assert {h["created"] for h in after["history"][1:]} == {"2026-11-30T21:24:31Z"}
    assert [(h.get("created_by"), h.get("empty_layer", False)) for h in after["history"][1:]] == STEPS
    assert sum(not h.get("empty_layer") for h in after["history"]) == len(DIFF_IDS)


def test_two_builds_of_the_same_layers_get_one_id() -> None:
    first, second = encoded(config()), encoded(rebuilt())
    assert image_id(first) != image_id(second)
    assert normalise(first, epoch=EPOCH) == normalise(second, epoch=EPOCH)


def test_what_describes_the_image_still_changes_its_id() -> None:
    base = normalise(encoded(config()), epoch=EPOCH)
    other_layer = config()
    other_layer["rootfs"] = {"type": "layers", "diff_ids": [*DIFF_IDS[:-1], "sha256:" + "0" * 64]}
    other_label = config()
    other_label["config"]["Labels"] = {**LABELS, "dev.accelenv.env": "another"}
    for changed in (other_layer, other_label):
        assert normalise(encoded(changed), epoch=EPOCH) != base
    assert normalise(encoded(config()), epoch=EPOCH + 1) != base


def test_the_canonical_form_is_sorted_compact_and_a_fixed_point() -> None:
    once = normalise(encoded(config()), epoch=EPOCH)
    assert once == json.dumps(json.loads(once), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert normalise(once, epoch=EPOCH) == once


@pytest.mark.parametrize(
    ("created", "kept"),
    [
        ("2026-11-30T21:24:31.999999999Z", True),  # within the epoch's second (the base's own entry)
        ("2026-11-30T21:24:30Z", True),
        ("2026-11-30T22:24:31+01:00", True),  # the same instant
        ("2026-11-30T21:24:32Z", False),
        ("soon", False),  # unreadable: the epoch
    ],
)
def test_a_history_time_is_clamped_to_the_epoch(created: str, kept: bool) -> None:
    document = config()
    document["history"][0]["created"] = created
    after = json.loads(normalise(encoded(document), epoch=EPOCH))
    assert after["history"][0]["created"] == (created if kept else "2026-11-30T21:24:31Z")


@pytest.mark.parametrize(
    ("config_bytes", "message"),
    [
        (b"{not json", "the image config is not JSON"),
        (b"[]", "the image config has no rootfs: not an image config"),
        (b'{"rootfs":{},"history":{}}', "the image config's history is not a list of entries"),
        (b'{"rootfs":{},"history":["x"]}', "the image config's history is not a list of entries"),
    ],
)
def test_what_is_not_an_image_config_is_refused(config_bytes: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalise(config_bytes, epoch=EPOCH)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-11-30T21:24:31.241272566Z", EPOCH),
        ("2026-11-30T21:24:31Z", EPOCH),
        ("2026-11-30T23:24:31.5+02:00", EPOCH),
        ("1970-01-01T00:00:00Z", 0),
        ("2026-11-30T21:24:31.1234567890Z", None),  # more than nanoseconds
        ("2026-11-30 21:24:31Z", None),
        ("", None),
    ],
)
def test_rfc3339_seconds(text: str, seconds: int | None) -> None:
    assert rfc3339_seconds(text) == seconds


def test_rfc3339() -> None:
    assert rfc3339(EPOCH) == "2026-11-30T21:24:31Z"
    assert rfc3339(0) == "1970-01-01T00:00:00Z"


# ---------------------------------------------------------------------------------------------------- archives


def saved(members: list[tuple[str, bytes]], *, symlink: str | None = None) -> bytes:
    """An archive shaped as `docker save` writes it (one folder per layer, the config, manifest.json)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if symlink is not None:
            link = tarfile.TarInfo(symlink)
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(link)
    return out.getvalue()


def chunked(data: bytes, size: int = 7919) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


RAW = encoded(config())
ID = image_id(RAW)
HEX = ID.removeprefix("sha256:")
LAYER = bytes(range(256)) * 4096  # 1 MiB


def test_the_config_is_found_in_a_save_archive_as_it_streams() -> None:
    members = [
        ("1111111111111111111111111111111111111111111111111111111111111111/VERSION", b"1.0"),
        ("1111111111111111111111111111111111111111111111111111111111111111/layer.tar", LAYER),
        (f"{HEX}.json", RAW),
        ("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff/layer.tar", LAYER),
        ("manifest.json", b"[]"),
    ]
    read: list[int] = []

    def stream() -> Iterator[bytes]:
        for chunk in chunked(saved(members)):
            read.append(len(chunk))
            yield chunk

    assert config_from_archive(stream(), ID) == RAW
    assert sum(read) < 2 * len(LAYER) + 64 * 1024  # it stops at the config: the last layer is left unread


@pytest.mark.parametrize(
    ("archive", "image", "message"),
    [
        (saved([("manifest.json", b"[]")]), ID, f"the archive of {ID} holds no {HEX}.json"),
        (saved([(f"{HEX}.json", RAW + b" ")]), ID, f"{HEX}.json in the archive of {ID} has another sha256"),
        (saved([], symlink=f"{HEX}.json"), ID, "is not a config file of at most"),
        (b"not a tar at all" * 64, ID, f"the archive of {ID} is not a readable tar"),
        (saved([]), "f175f7df4158", "'f175f7df4158' is not an image id"),
    ],
)
def test_an_archive_without_the_right_config_is_refused(archive: bytes, image: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        config_from_archive(chunked(archive), image)


def test_a_config_larger_than_the_bound_is_not_read() -> None:
    big = b"{" + b" " * MAX_CONFIG + b"}"
    big_id = "sha256:" + hashlib.sha256(big).hexdigest()
    with pytest.raises(ValueError, match="is not a config file of at most 16777216 B"):
        config_from_archive(chunked(saved([(f"{big_id[7:]}.json", big)]), 1 << 20), big_id)


def test_the_load_archive_holds_the_config_and_a_manifest_only() -> None:
    canonical = normalise(RAW, epoch=EPOCH)
    archive = config_archive(canonical)
    assert config_archive(canonical) == archive  # deterministic
    with tarfile.open(fileobj=io.BytesIO(archive)) as opened:
        members = opened.getmembers()
        assert [m.name for m in members] == [f"{image_id(canonical)[7:]}.json", "manifest.json"]
        assert all(m.isreg() and m.mtime == 0 and m.uid == 0 for m in members)
        config_file, manifest_file = (opened.extractfile(m) for m in members)
        assert config_file is not None
        assert manifest_file is not None
        assert config_file.read() == canonical
        manifest = json.loads(manifest_file.read())
    assert manifest == [
        {
            "Config": f"{image_id(canonical)[7:]}.json",
            "RepoTags": None,
            "Layers": [f"{d[7:]}/layer.tar" for d in DIFF_IDS],
        }
    ]


@pytest.mark.parametrize(
    "rootfs",
    [{}, {"diff_ids": "sha256:x"}, {"diff_ids": ["../../etc/passwd"]}, {"diff_ids": [DIFF_IDS[0] + "\n"]}],
)
def test_a_load_archive_names_only_digests(rootfs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"rootfs\.diff_ids is not a list of sha256 digests"):
        config_archive(json.dumps({"rootfs": rootfs}).encode())
