"""`accelenv prune`: which images go and why is a pure function of plain image records; the removal goes through
the engine adapter (a hand-written fake here)."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import TYPE_CHECKING

import pytest

from accelenv.build.engine import EngineError, ImageInfo
from accelenv.build.prune import (
    Current,
    ImageRecord,
    PrunePlan,
    human_bytes,
    image_records,
    is_content_tag,
    plan_prune,
    remove,
    repository_of,
    same_repository,
)
from accelenv.cli import main

if TYPE_CHECKING:
    from pathlib import Path

MiB = 2**20
HUMAN = "accelenv:cpu-py311-cpu-py311"


def image(
    n: int,
    *,
    env: str = "cpu-py311",
    tags: tuple[str, ...] | None = None,
    created: str | None = None,
    containers: tuple[str, ...] = (),
    labelled: bool = True,
) -> ImageRecord:
    """Image number n: content tag `<env>-<n as 16 hex>`, created on day n (the higher n, the newer)."""
    return ImageRecord(
        id=f"sha256:{n:064x}",
        tags=tags if tags is not None else (f"accelenv:{env}-{n:016x}",),
        labels={"dev.accelenv.env": env, "dev.accelenv.family": "cpu"} if labelled else {"other": "x"},
        created=created or f"2026-11-{n:02d}T10:00:00.000000001Z",
        size=300 * MiB,
        unique_size=n * MiB,
        containers=containers,
    )


def actions(plan: PrunePlan) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {" ".join(d.tags): (d.action, d.reasons) for d in plan.decisions}


def removed(plan: PrunePlan) -> list[int]:
    return sorted(int(d.image.removeprefix("sha256:"), 16) for d in plan.removals)


# ---------------------------------------------------------------------------------------------------- --keep


@pytest.mark.parametrize(
    ("keep", "gone"),
    [(0, [1, 2, 3, 4]), (1, [1, 2, 3]), (2, [1, 2]), (4, []), (9, [])],
)
def test_keep_the_newest_n_per_environment(keep: int, gone: list[int]) -> None:
    plan = plan_prune([image(2), image(4), image(1), image(3)], repository="accelenv", keep=keep)
    assert removed(plan) == gone
    assert plan.freed == sum(gone) * MiB


def test_the_reasons_say_why() -> None:
    plan = plan_prune([image(1), image(2), image(3, env="gpu")], repository="accelenv", keep=1)
    assert actions(plan) == {
        "accelenv:cpu-py311-0000000000000002": ("keep", ("the newest of cpu-py311",)),
        "accelenv:cpu-py311-0000000000000001": ("remove", ("beyond --keep 1: the 2nd newest of cpu-py311",)),
        "accelenv:gpu-0000000000000003": ("keep", ("the newest of gpu",)),
    }


def test_each_environment_is_counted_on_its_own() -> None:
    images = [image(n, env=env) for n in (1, 2, 3) for env in ("a", "b")]
    plan = plan_prune([*images, image(4, env="c")], repository="accelenv", keep=2)
    assert [(d.env, d.image[-1]) for d in plan.removals] == [("a", "1"), ("b", "1")]


def test_the_human_tags_target_counts_as_the_newest() -> None:
    """A rebuild of older content (a pin reverted) points the human tag at an old image: it stays."""
    old = image(1, tags=("accelenv:cpu-py311-0000000000000001", HUMAN))
    plan = plan_prune([old, image(2), image(3)], repository="accelenv", keep=1)
    assert removed(plan) == [2, 3]
    assert actions(plan)[f"accelenv:cpu-py311-0000000000000001 {HUMAN}"] == (
        "keep",
        (f"the newest of cpu-py311 (the target of {HUMAN})",),
    )
    assert removed(plan_prune([old, image(2)], repository="accelenv", keep=0)) == [1, 2]  # --keep 0: it goes too


def test_removing_an_image_untags_all_its_tags_in_the_repository() -> None:
    named = image(1, tags=("accelenv:cpu-py311-0000000000000001", HUMAN))
    [decision] = plan_prune([named], repository="accelenv", keep=0).removals
    assert decision.tags == ("accelenv:cpu-py311-0000000000000001", HUMAN)
    assert decision.freed == 1 * MiB


def test_creation_times_are_compared_as_times() -> None:
    """The engine writes RFC 3339 with trailing zeros of the fraction cut: text order would be wrong."""
    times = {1: "2026-11-30T23:16:11.5Z", 2: "2026-11-30T23:16:11.45Z", 3: "2026-12-01T01:16:11+02:00"}
    plan = plan_prune([image(n, created=t) for n, t in times.items()], repository="accelenv", keep=1)
    assert removed(plan) == [2, 3]  # 11.5 is newer than 11.45, and 01:16+02:00 is 23:16 the day before


def test_the_last_build_orders_images_whose_creation_times_are_equal() -> None:
    """Reproducible images of one base share `created` (the base's time): when the engine last tagged each one
    (a build made or confirmed it) decides which are newest."""
    same = "2026-10-01T00:00:00Z"
    images = [
        dataclasses.replace(image(n, created=same), last_tagged=f"2026-11-{29 - n:02d}T10:00:00Z") for n in (1, 2, 3)
    ]
    plan = plan_prune(images, repository="accelenv", keep=1)
    assert [d.image for d in plan.decisions if d.action == "keep"] == [images[0].id]  # tagged last: 2026-11-28


def test_equal_times_and_unreadable_times_order_stably() -> None:
    same = [image(n, created="2026-11-30T23:16:11Z") for n in (3, 1, 2)]
    assert removed(plan_prune(same, repository="accelenv", keep=1)) == [2, 3]  # the id breaks the tie
    odd = plan_prune([image(1), image(2, created="yesterday")], repository="accelenv", keep=1)
    assert removed(odd) == [2]  # an unreadable time counts as the oldest


def test_a_negative_keep_is_refused() -> None:
    with pytest.raises(ValueError, match=r"--keep must be 0 or more, not -1"):
        plan_prune([], repository="accelenv", keep=-1)


# ---------------------------------------------------------------------------------------------- what is considered


def test_only_accelenv_images_with_a_content_tag_in_the_repository_are_considered() -> None:
    images = [
        image(1, labelled=False),  # no accelenv label
        image(2, tags=("other:cpu-py311-0000000000000002",)),  # another repository
        image(3, tags=(HUMAN,)),  # no content tag
        image(4, tags=("accelenv:cpu-py311-nothex0000000000",)),
        image(5, tags=("accelenv:gpu-0000000000000005",)),  # a content tag of another environment than its label
        image(6, tags=()),  # dangling
    ]
    assert plan_prune(images, repository="accelenv", keep=0).decisions == ()


def test_an_image_tagged_elsewhere_is_only_untagged_and_frees_nothing() -> None:
    pushed = ("accelenv:cpu-py311-0000000000000001", "registry.example.com:5000/team/accelenv:cpu-py311-1")
    [decision] = plan_prune([image(1, tags=pushed)], repository="accelenv", keep=0).decisions
    assert decision.action == "remove"
    assert decision.tags == ("accelenv:cpu-py311-0000000000000001",)
    assert decision.elsewhere == ("registry.example.com:5000/team/accelenv:cpu-py311-1",)
    assert decision.freed == 0
    assert decision.reasons[-1] == (
        "still tagged registry.example.com:5000/team/accelenv:cpu-py311-1: untagged here only"
    )


def test_an_image_a_container_uses_is_skipped() -> None:
    plan = plan_prune([image(1, containers=("busy", "stopped")), image(2)], repository="accelenv", keep=0)
    assert [(d.image[-1], d.action) for d in plan.decisions] == [("2", "remove"), ("1", "skip")]
    assert plan.skipped[0].reasons == (
        "beyond --keep 0: the 2nd newest of cpu-py311",
        "in use by container busy, stopped: skipped",
    )
    assert plan.skipped[0].freed == 0
    assert plan.freed == 2 * MiB


@pytest.mark.parametrize(
    ("tag", "repository"),
    [
        ("accelenv:cpu-py311-0123456789abcdef", "accelenv"),
        ("localhost:5000/accelenv:cpu", "localhost:5000/accelenv"),
        ("localhost:5000/accelenv", "localhost:5000/accelenv"),
        ("team/accelenv:x", "team/accelenv"),
    ],
)
def test_repository_of(tag: str, repository: str) -> None:
    assert repository_of(tag) == repository


@pytest.mark.parametrize(
    ("name", "repository", "expected"),
    [
        ("accelenv", "accelenv", True),
        ("docker.io/library/accelenv", "accelenv", True),  # Podman's Docker API tags `accelenv` so
        ("localhost/accelenv", "accelenv", True),  # podman tag, and podman load of a docker save
        ("index.docker.io/library/accelenv", "accelenv", True),
        ("docker.io/accelenv", "docker.io/library/accelenv", True),
        ("docker.io/team/accelenv", "team/accelenv", True),
        ("localhost/team/accelenv", "team/accelenv", True),
        ("docker.io/team/accelenv", "accelenv", False),
        ("team/accelenv", "accelenv", False),
        ("evil/accelenv", "accelenv", False),
        ("localhost:5000/accelenv", "accelenv", False),  # a registry, with its port
        ("localhost:5000/accelenv", "localhost:5000/accelenv", True),
        ("registry.example.com/accelenv", "accelenv", False),
        ("registry.example.com/library/accelenv", "registry.example.com/accelenv", False),  # only Docker Hub's
        ("quay.io/accelenv", "quay.io/accelenv", True),
        ("docker.io/library/accelenv-other", "accelenv", False),
    ],
)
def test_same_repository_under_each_engines_names(name: str, repository: str, expected: bool) -> None:
    assert same_repository(name, repository) is expected
    assert same_repository(repository, name) is expected


@pytest.mark.parametrize("spelling", ["docker.io/library/accelenv", "localhost/accelenv"])
def test_podmans_names_are_the_repositorys(spelling: str) -> None:
    """Podman lists a tag `accelenv:...` in full: prune removes (and names) its images as it does on Docker."""
    content = {n: f"{spelling}:cpu-py311-{n:016x}" for n in (1, 2, 3)}
    human = f"{spelling}:cpu-py311-cpu-py311"
    podman = [image(1, tags=(content[1],)), image(2, tags=(content[2],)), image(3, tags=(content[3], human))]
    current = Current(content_tags={"cpu-py311": "accelenv:cpu-py311-0000000000000001"})
    plan = plan_prune(podman, repository="accelenv", keep=2, current=current)
    assert actions(plan) == {
        f"{spelling}:cpu-py311-0000000000000003 {spelling}:cpu-py311-cpu-py311": (
            "keep",
            (
                f"the newest of cpu-py311 (the target of {spelling}:cpu-py311-cpu-py311)",
                (
                    "not what the matrix builds now (accelenv:cpu-py311-0000000000000001), but the target of "
                    f"{spelling}:cpu-py311-cpu-py311"
                ),
            ),
        ),
        f"{spelling}:cpu-py311-0000000000000001": (
            "keep",
            ("the 2nd newest of cpu-py311", "what the matrix builds now"),
        ),
        f"{spelling}:cpu-py311-0000000000000002": (
            "remove",
            (
                "beyond --keep 2: the 3rd newest of cpu-py311",
                "not what the matrix builds now (accelenv:cpu-py311-0000000000000001)",
            ),
        ),
    }
    assert all(d.elsewhere == () for d in plan.decisions)
    assert removed(plan_prune(podman, repository="accelenv", keep=0)) == [1, 2, 3]


@pytest.mark.parametrize(
    ("tag", "env", "expected"),
    [
        ("accelenv:cpu-py311-0123456789abcdef", "cpu-py311", True),
        ("accelenv:cpu-py311-0123456789ABCDEF", "cpu-py311", False),
        ("accelenv:cpu-py311-0123456789abcde", "cpu-py311", False),
        ("accelenv:cpu-py311-cpu-py311", "cpu-py311", False),
        ("accelenv:cpu-py311-0123456789abcdef", "cpu", False),  # another environment's tag is not this one's
        ("accelenv:cpu-0123456789abcdef", "cpu", True),
    ],
)
def test_content_tags(tag: str, env: str, expected: bool) -> None:
    assert is_content_tag(tag, env) is expected


# ---------------------------------------------------------------------------------------------------- --unused


def test_unused_removes_gone_environments_and_stale_content() -> None:
    current = Current(
        content_tags={"cpu-py311": "accelenv:cpu-py311-0000000000000001", "later": None, "imageless": None},
        unknown={"later": "lock is stale: run `accelenv lock later`", "imageless": "no lock"},
    )
    images = [
        image(1),  # current, though older
        image(2),  # stale and not named
        image(3, tags=("accelenv:cpu-py311-0000000000000003", HUMAN)),  # stale, but the human tag's target
        image(4, env="gone"),
        image(5, env="later"),
        image(6, env="later"),
    ]
    plan = plan_prune(images, repository="accelenv", keep=9, current=current)
    assert actions(plan) == {
        "accelenv:cpu-py311-0000000000000003 accelenv:cpu-py311-cpu-py311": (
            "keep",
            (
                "the newest of cpu-py311 (the target of accelenv:cpu-py311-cpu-py311)",
                (
                    "not what the matrix builds now (accelenv:cpu-py311-0000000000000001), but the target of "
                    "accelenv:cpu-py311-cpu-py311"
                ),
            ),
        ),
        "accelenv:cpu-py311-0000000000000002": (
            "remove",
            ("not what the matrix builds now (accelenv:cpu-py311-0000000000000001)",),
        ),
        "accelenv:cpu-py311-0000000000000001": ("keep", ("the 2nd newest of cpu-py311", "what the matrix builds now")),
        "accelenv:gone-0000000000000004": ("remove", ("the matrix no longer names gone",)),
        "accelenv:later-0000000000000006": (
            "keep",
            ("the newest of later", "later's current content tag is unknown: only --keep applies"),
        ),
        "accelenv:later-0000000000000005": (
            "keep",
            ("the 2nd newest of later", "later's current content tag is unknown: only --keep applies"),
        ),
    }
    assert plan.unused
    assert plan.unknown == {"later": "lock is stale: run `accelenv lock later`"}  # only where it matters


def test_unused_and_keep_both_apply() -> None:
    current = Current(content_tags={"cpu-py311": "accelenv:cpu-py311-0000000000000001"})
    plan = plan_prune([image(1), image(2), image(3)], repository="accelenv", keep=1, current=current)
    assert removed(plan) == [2, 3]  # the current image counts as the newest; the others are stale and beyond it
    assert actions(plan)["accelenv:cpu-py311-0000000000000003"][1] == (
        "beyond --keep 1: the 2nd newest of cpu-py311",
        "not what the matrix builds now (accelenv:cpu-py311-0000000000000001)",
    )
    assert actions(plan)["accelenv:cpu-py311-0000000000000001"] == (
        "keep",
        ("the newest of cpu-py311", "what the matrix builds now"),
    )


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (57 * MiB, "57.0 MiB"), (int(1.2 * 2**30), "1.2 GiB")],
)
def test_human_bytes(size: int, text: str) -> None:
    assert human_bytes(size) == text


# ---------------------------------------------------------------------------------------------------- the edge


class FakeEngine:
    """Images by id; `refuse` names tags the engine will not remove (a container started since the plan)."""

    def __init__(self, images: list[ImageRecord], refuse: tuple[str, ...] = ()) -> None:
        self.images = {i.id: i for i in images}
        self.refuse = refuse
        self.removed: list[str] = []

    def __enter__(self) -> FakeEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def labelled(self, label: str) -> list[ImageInfo]:
        return [
            ImageInfo(id=i.id, tags=i.tags, labels=dict(i.labels), size=i.size, layers=(), created=i.created)
            for i in self.images.values()
            if label in i.labels
        ]

    def unique_sizes(self) -> dict[str, int]:
        return {i.id: i.unique_size for i in self.images.values()}

    def containers_by_image(self) -> dict[str, list[str]]:
        return {i.id: list(i.containers) for i in self.images.values() if i.containers}

    def remove(self, reference: str) -> None:
        if reference in self.refuse:
            raise EngineError(f"cannot remove {reference}: conflict: container abc is using its referenced image")
        self.removed.append(reference)


def test_image_records_come_with_unique_sizes_and_containers() -> None:
    engine = FakeEngine([image(1, containers=("busy",)), image(2), image(3, labelled=False)])
    records = image_records(engine)
    assert [(r.id[-1], r.unique_size, r.containers) for r in records] == [("1", MiB, ("busy",)), ("2", 2 * MiB, ())]


def test_a_refused_removal_is_an_outcome_and_the_others_go_on() -> None:
    engine = FakeEngine([image(1), image(2), image(3)], refuse=("accelenv:cpu-py311-0000000000000001",))
    plan = plan_prune(image_records(engine), repository="accelenv", keep=1)
    seen: list[str] = []
    outcomes = remove(engine, plan, lambda o: seen.append(o.decision.image[-1]))
    assert [(o.decision.image[-1], o.removed) for o in outcomes] == [("2", True), ("1", False)]
    assert "container abc is using" in outcomes[1].error
    assert engine.removed == ["accelenv:cpu-py311-0000000000000002"]
    assert seen == ["2", "1"]


def prune_cli(monkeypatch: pytest.MonkeyPatch, engine: FakeEngine, *args: str) -> tuple[int, str]:
    import accelenv.build.engine

    monkeypatch.setattr(accelenv.build.engine, "connect", lambda timeout=10.0: engine)
    out = io.StringIO()
    code = main(["prune", *args], out=out)
    return code, out.getvalue()


def test_the_command_lists_removes_and_sums_up(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FakeEngine([image(1), image(2), image(3, containers=("ci",)), image(4), image(5)])
    code, out = prune_cli(monkeypatch, engine, "--keep", "2", "--dry-run")
    assert code == 0
    assert engine.removed == []
    assert out.splitlines()[-1] == "would remove 2 images, 3.0 MiB freed; 1 skipped (in use) (dry run: nothing removed)"
    assert (
        "would remove accelenv:cpu-py311-0000000000000002  300.0 MiB, frees 2.0 MiB: "
        "beyond --keep 2: the 4th newest of cpu-py311" in out
    )
    assert "skip         accelenv:cpu-py311-0000000000000003  300.0 MiB: beyond --keep 2" in out

    code, out = prune_cli(monkeypatch, engine, "--keep", "2")
    assert code == 0
    assert sorted(engine.removed) == ["accelenv:cpu-py311-0000000000000001", "accelenv:cpu-py311-0000000000000002"]
    assert out.splitlines()[-1] == "removed 2 images, 3.0 MiB freed; 1 skipped (in use)"


def test_a_failed_removal_is_reported_with_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FakeEngine([image(1), image(2)], refuse=("accelenv:cpu-py311-0000000000000001",))
    code, out = prune_cli(monkeypatch, engine, "--keep", "0", "--json")
    assert code == 1
    result = json.loads(out)
    assert (result["removed"], result["failed"], result["freed_bytes"]) == (1, 1, 2 * MiB)
    failed = next(i for i in result["images"] if not i["removed"])
    assert failed["tags"] == ["accelenv:cpu-py311-0000000000000001"]
    assert "conflict" in failed["error"]


def test_keep_must_be_a_whole_number(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        prune_cli(monkeypatch, FakeEngine([]), "--keep", "-1")
    assert exited.value.code == 2
    assert "argument --keep: expected a whole number, 0 or more, not '-1'" in capsys.readouterr().err


def test_an_engine_that_does_not_answer_is_the_engine_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    assert main(["prune", "--dry-run"], out=io.StringIO()) == 1
    assert "accelenv: no container engine answers at unix://" in capsys.readouterr().err
