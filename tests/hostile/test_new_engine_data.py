"""What the engine reports, as untrusted data: `accelenv prune`'s planner and output with odd labels, tags,
times and sizes, and `docker save` streams that are not what an engine writes; and the HTML report with hostile
matrix strings in every field that reaches the page."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import tarfile
from typing import TYPE_CHECKING, Any

import pytest
import tomlkit
from hostilekit import accelenv, assert_clean_error
from reference import REFERENCE_TEXT

from accelenv.build.engine import ImageInfo
from accelenv.build.image_config import MAX_CONFIG, config_from_archive, normalise
from accelenv.build.prune import ENV_LABEL, ImageRecord, human_bytes, plan_prune
from accelenv.cli import main
from accelenv.matrix.load import model_from_text
from accelenv.plan.report import html_page
from accelenv.plan.start import start_steps
from accelenv.timestamps import rfc3339_seconds

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

HEX = "0123456789abcdef"


def _image(
    env: str, *, n: int = 0, created: str = "2026-01-01T00:00:00Z", size: int = 10, unique: int = 5, **kw: Any
) -> ImageRecord:
    tags = kw.pop("tags", (f"accelenv:{env}-{HEX[n] * 16}",))
    return ImageRecord(
        id=f"sha256:{HEX[n] * 64}",
        tags=tags,
        labels=kw.pop("labels", {ENV_LABEL: env}),
        created=created,
        size=size,
        unique_size=unique,
        **kw,
    )


# ---------------------------------------------------------------------------------------------------- prune


@pytest.mark.parametrize(
    "created",
    [
        "2026-13-01T00:00:00Z",  # month 13: before, a ValueError out of the planner (an internal error)
        "2026-02-30T00:00:00Z",
        "2026-01-01T00:00:00+99:99",
        "9999-12-31T23:59:59-23:59",  # past year 9999 in UTC: an OverflowError
        "\u0662\u0660\u0662\u0666-01-01T00:00:00Z",  # Arabic-Indic digits match \d
        "",
        "yesterday",
    ],
)
def test_malformed_times_sort_as_the_oldest(created: str) -> None:
    images = [_image("cpu", n=1, created="2025-01-01T00:00:00Z"), _image("cpu", n=2, created=created)]
    plan = plan_prune(images, repository="accelenv", keep=1)
    assert [(d.image[7:9], d.action) for d in plan.decisions] == [("11", "keep"), ("22", "remove")]


def test_a_time_in_the_future_is_the_newest_not_an_error() -> None:
    images = [_image("cpu", n=1, created="2025-01-01T00:00:00Z"), _image("cpu", n=2, last_tagged="2999-01-01T00:00Z")]
    images.append(_image("cpu", n=3, created="2998-01-01T00:00:00.123456789+01:00"))
    plan = plan_prune(images, repository="accelenv", keep=1)
    assert [d.action for d in plan.decisions] == ["keep", "remove", "remove"]
    assert plan.decisions[0].image.startswith("sha256:33")


@pytest.mark.parametrize(("size", "unique"), [(-1, -1), (-(2**70), 5), (10**400, 10**400)])
def test_negative_and_huge_sizes_stay_byte_counts(size: int, unique: int) -> None:
    plan = plan_prune([_image("cpu", n=1, size=size, unique=unique)], repository="accelenv", keep=0)
    (decision,) = plan.decisions
    assert 0 <= decision.size < 2**63
    assert 0 <= decision.freed < 2**63
    assert plan.freed >= 0
    human_bytes(decision.size)  # a float division of 10**400 overflowed
    json.dumps(decision.as_json())


def test_an_image_listed_twice_is_decided_once() -> None:
    images = [_image("cpu", n=1), _image("cpu", n=1), _image("cpu", n=2, created="2025-01-01T00:00:00Z")]
    plan = plan_prune(images, repository="accelenv", keep=1)
    assert [d.image[7:9] for d in plan.decisions] == ["11", "22"]
    assert len(plan.removals) == 1


@pytest.mark.parametrize(
    ("repository", "tag"),
    [
        ("localhost:5000/accelenv", "localhost:5000/accelenv:cpu-" + "1" * 16),
        ("[::1]:5000/accelenv", "[::1]:5000/accelenv:cpu-" + "1" * 16),
        ("accelenv", "accelenv:cpu-" + "1" * 16 + ":extra"),
        ("accelenv", "accelenv:cpu-" + "1" * 15 + "\u0661"),
        ("accelenv", "evil/accelenv:cpu-" + "1" * 16),
    ],
)
def test_odd_repositories_and_ports(repository: str, tag: str) -> None:
    plan = plan_prune([_image("cpu", n=1, tags=(tag,))], repository=repository, keep=0)
    ours = tag.rpartition(":")[0] == repository and re.fullmatch(r"cpu-[0-9a-f]{16}", tag.rpartition(":")[2])
    assert [d.tags for d in plan.decisions] == ([(tag,)] if ours else [])


@pytest.mark.parametrize("env", ["", ".*", "cpu|gpu", "../x", "a\nb", "\x1b[2J"])
def test_odd_env_labels_match_only_their_own_tags(env: str) -> None:
    tag = f"accelenv:{env}-{'1' * 16}"
    other = _image("cpu", n=2, tags=(f"accelenv:cpu-{'2' * 16}",), labels={ENV_LABEL: env})
    plan = plan_prune([_image(env, n=1, tags=(tag,)), other], repository="accelenv", keep=0)
    assert [d.tags for d in plan.decisions] == ([(tag,)] if env and "/" not in env else [])  # a tag has no "/"


@pytest.mark.parametrize("keep", ["-1", "1.5", "two", "\u00b2", "9" * 5000])
def test_keep_that_is_not_a_count_is_a_usage_error(matrix: Path, keep: str) -> None:
    result = accelenv("--matrix", str(matrix), "prune", "--keep", keep, "--dry-run")
    assert result.returncode == 2, result.stderr
    assert "--keep" in result.stderr
    assert "Traceback" not in result.stderr


class _PruneEngine:
    def __init__(self, images: list[ImageInfo]) -> None:
        self.images = images
        self.removed: list[str] = []

    def __enter__(self) -> _PruneEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def labelled(self, label: str) -> list[ImageInfo]:
        return [i for i in self.images if label in i.labels]

    def unique_sizes(self) -> dict[str, int]:
        return {i.id: -1 for i in self.images}  # the engine's "not computed"

    def containers_by_image(self) -> dict[str, list[str]]:
        return {self.images[0].id: ["web\n\x1b[31mstopped"]}

    def remove(self, reference: str) -> None:
        self.removed.append(reference)


def test_prune_output_is_one_line_per_image(
    matrix: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = "cpu\nremove everything\x1b]0;pwned\x07"
    images = [
        ImageInfo(
            id=f"sha256:{c * 64}",
            tags=(f"accelenv:{env}-{c * 16}", f"localhost:5000/accelenv:{env}-{c * 16}"),
            labels={ENV_LABEL: env},
            size=-5,
            layers=(),
            created=created,
        )
        for c, created in (("1", "2026-13-01T00:00:00Z"), ("2", "2026-01-01T00:00:00Z"), ("3", "bogus"))
    ]
    engine = _PruneEngine(images)
    monkeypatch.setattr("accelenv.build.engine.connect", lambda timeout=10.0: engine)
    assert main(["--matrix", str(matrix), "prune", "--keep", "1", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "\x1b" not in out
    assert "\x07" not in out
    lines = out.splitlines()
    assert len(lines) == 3 + 1  # one per image, then the summary
    assert all(line.startswith(("keep ", "would remove", "skip ")) for line in lines[:3]), lines
    assert "cpu\\nremove everything\\x1b]0;pwned\\x07-2222222222222222" in lines[0]
    assert engine.removed == []


# ---------------------------------------------------------------------------------------------------- docker save


IMAGE_CONFIG = json.dumps({"rootfs": {"type": "layers", "diff_ids": []}, "history": []}).encode()
IMAGE_ID = "sha256:" + hashlib.sha256(IMAGE_CONFIG).hexdigest()
CONFIG_NAME = IMAGE_ID[7:] + ".json"


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for info, data in members:
            info.size = info.size or len(data)
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return out.getvalue()


def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **kw: Any) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in kw.items():
        setattr(info, key, value)
    return info, data


def _chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize(
    ("archive", "says"),
    [
        (_tar(_member("manifest.json", b"[]")), f"holds no {CONFIG_NAME}"),
        (_tar(_member(CONFIG_NAME, b"{}")), "has another sha256"),
        (_tar(_member(CONFIG_NAME, kind=tarfile.SYMTYPE, linkname="/etc/passwd")), "is not a config file"),
        (_tar(_member(CONFIG_NAME, kind=tarfile.LNKTYPE, linkname="manifest.json")), "is not a config file"),
        (_tar(_member(CONFIG_NAME, kind=tarfile.DIRTYPE)), "is not a config file"),
        (_tar(_member(CONFIG_NAME, kind=tarfile.FIFOTYPE)), "is not a config file"),
        (_tar(_member(CONFIG_NAME, b"x" * (MAX_CONFIG + 1))), f"of at most {MAX_CONFIG} B"),
        (_tar(_member("../" + CONFIG_NAME, IMAGE_CONFIG)), f"holds no {CONFIG_NAME}"),
        (b"not a tar at all" * 100, "is not a readable tar"),
        (b"", "is not a readable tar"),
        (_tar(_member(CONFIG_NAME, IMAGE_CONFIG))[:530], "is not a readable tar"),  # cut in the config
    ],
    ids=[
        "no-config",
        "wrong-sha",
        "symlink",
        "hardlink",
        "folder",
        "fifo",
        "huge-config",
        "dotdot",
        "garbage",
        "empty",
        "truncated",
    ],
)
def test_hostile_save_streams_are_value_errors(archive: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=r"\A") as caught:
        config_from_archive(_chunks(archive), IMAGE_ID)
    assert says in str(caught.value)


def test_the_config_is_found_after_other_members() -> None:
    archive = _tar(_member("layer/layer.tar", b"\0" * 100_000), _member("./" + CONFIG_NAME, IMAGE_CONFIG))
    assert config_from_archive(_chunks(archive), IMAGE_ID) == IMAGE_CONFIG


def test_a_tar_bomb_header_is_not_read_into_memory() -> None:
    """A pax header claiming 8 GiB: before, tarfile read all of it into memory (the whole stream, here 64 MiB)."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = tarfile.XHDTYPE
    info.size = 8 * 2**30
    consumed = 0

    def stream() -> Iterator[bytes]:
        nonlocal consumed
        yield info.tobuf(format=tarfile.GNU_FORMAT)
        while consumed < 64 * 2**20:
            consumed += 2**20
            yield b"\0" * 2**20

    with pytest.raises(ValueError, match="extended header"):
        config_from_archive(stream(), IMAGE_ID)
    assert consumed <= 2 * 2**20


def test_an_image_id_that_is_not_one_is_refused_before_reading() -> None:
    with pytest.raises(ValueError, match="is not an image id"):
        config_from_archive(iter(()), "sha256:../../etc")


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (b"\xff", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"[]", "no rootfs"),
        (b'{"rootfs": {}, "history": {"a": 1}}', "history is not a list"),
        (b'{"rootfs": {}, "history": [1]}', "history is not a list"),
    ],
)
def test_normalise_refuses_what_is_not_a_config(config: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        normalise(config, epoch=0)


@pytest.mark.parametrize(
    "created", ["2026-13-01T00:00:00Z", "2026-01-01T00:00:00+99:99", "\u0662" * 4 + "-01-01T00:00:00Z"]
)
def test_malformed_history_times_are_clamped_not_errors(created: str) -> None:
    """Before: ValueError (month must be in 1..12) out of normalise and out of the build's epoch."""
    assert rfc3339_seconds(created) is None
    config = json.dumps({"rootfs": {}, "history": [{"created": created}]}).encode()
    assert json.loads(normalise(config, epoch=0))["history"] == [{"created": "1970-01-01T00:00:00Z"}]


# ---------------------------------------------------------------------------------------------------- HTML report


MARK = "<script>alert(1)</script>"
EVIL = f"x\"'</script><!--{MARK}&amp;"


def _hostile_matrix() -> str:
    document = tomlkit.parse(REFERENCE_TEXT)
    for section in ("skus", "envs", "runtimes", "families", "sources", "os"):
        for entry in document.get(section, {}).values():
            for key in ("name", "description", "title", "notes"):
                if key in entry:
                    entry[key] = f"{key} {EVIL}" if key != "notes" or isinstance(entry[key], str) else [EVIL]
    env = document["envs"]["gpu-nvidia-cu128"]
    env["tests"] = [f"tests/x.py; rm -rf ~ #{MARK}", "$(touch /tmp/pwned)", "-k", "a and `id`"]
    document["sources"]["cuda-gpus"]["url"] = "javascript:alert(1)//https://"
    return tomlkit.dumps(document)


def test_no_hostile_matrix_string_reaches_the_page_as_markup(matrix: Path) -> None:
    matrix.write_text(_hostile_matrix())
    result = accelenv("--matrix", str(matrix), "report", "--format", "html")
    if result.returncode != 0:  # the schema refuses some of the strings: then the page is built from the model
        assert_clean_error(result, code=1, says="error")
    page = html_page(model_from_text(_hostile_matrix()))
    head, _, rest = page.partition('<script id="data" type="application/json">')
    data, _, tail = rest.partition("</script>")
    for part in (head, tail):
        assert MARK not in part
        assert "<!--<" not in part
        assert 'href="javascript:' not in part.lower()
    assert "</" not in data
    assert "<!--" not in data
    assert any(EVIL in text for text in _strings(json.loads(data)))  # the data holds the strings, intact
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in head  # and the page shows them, as text


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_get_started_commands_quote_hostile_test_paths() -> None:
    model = model_from_text(_hostile_matrix())
    env = model.envs["gpu-nvidia-cu128"]
    steps = start_steps(model, env, None, "gpu-nvidia")
    run = next(step.text for step in steps if "accelenv run" in step.text)
    words = shlex.split(run.split(" && ", 1)[1])
    assert words == ["accelenv", "run", env.id, "--", "pytest", *env.tests]
