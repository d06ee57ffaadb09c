"""Image builds with a hand-written fake engine: content addressing, tags only on success, order, push, wiring."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from reference import REFERENCE_MATRIX

from accelenv.build.context import (
    BaseImage,
    BuildError,
    BuildPlan,
    build_order,
    epoch_of,
    pip_platforms,
    plan_build,
    source_hash,
    split_lock,
    sub_matrix,
)
from accelenv.build.engine import EngineError, EngineInfo, ImageInfo, RunSpec
from accelenv.build.image_config import image_id, normalise
from accelenv.build.images import (
    HOLD_REPOSITORY,
    build_images,
    locked_pins,
    normalise_image,
    run_spec,
    summary,
)
from accelenv.host.root import Root
from accelenv.matrix import Matrix, load_matrix, validate_text
from accelenv.plan.lock import OsLock, OsPackage, image_requirements, parse_apt_output, parse_os_lock, render_os_lock
from accelenv.plan.render import human_tag

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]
LOCK = (REPO / "envs" / "cpu-py311" / "requirements.lock").read_text()
IMAGE_LOCK = (REPO / "envs" / "accelenv-image.lock").read_text()
BASE = BaseImage(id="sha256:" + "b" * 64, digest=None, created="2025-06-01T12:00:00.123456789Z")


def builder_config(n: int) -> bytes:
    """A config as the classic builder writes it (build n): the same layers, its own time and container."""
    return json.dumps(
        {
            "architecture": "amd64",
            "config": {"User": "accelenv", "Image": f"sha256:{n:064x}", "Labels": {"dev.accelenv.env": "cpu-py311"}},
            "container": f"{n:064x}",
            "container_config": {"Hostname": f"{n:012x}"},
            "created": f"2026-12-01T00:00:{n:02d}.5Z",
            "docker_version": "20.10.24+dfsg1",
            "history": [{"created": "2025-06-01T12:00:00.1Z"}, {"created": f"2026-12-01T00:00:{n:02d}Z"}],
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "1" * 64, "sha256:" + "2" * 64]},
        }
    ).encode()


class FakeEngine:
    """Images in a dict (by reference and by id); builds succeed or raise as told, each with its own config, as
    the classic builder's; loads succeed or raise as told; records every call."""

    def __init__(
        self, *, fail: str | None = None, registry: set[str] | None = None, load_fails: BaseException | None = None
    ) -> None:
        self.images: dict[str, ImageInfo] = {}
        self.configs: dict[str, bytes] = {}
        self.fail = fail
        self.load_fails = load_fails
        self.registry = registry if registry is not None else set()
        self.calls: list[tuple[str, ...]] = []
        self.indexes: dict[str, dict[str, str]] = {}
        self.build_tag: str | None = None

    def info(self) -> EngineInfo:
        return EngineInfo(host="fake", api_version="1.41", server_version="20.10", os="linux", arch="amd64")

    def image(self, reference: str) -> ImageInfo | None:
        return self.images.get(reference)

    def labelled(self, label: str) -> list[ImageInfo]:
        return list({i.id: i for i in self.images.values() if label in i.labels}.values())

    def build(
        self,
        context: str,
        *,
        tag: str | None,
        nocache: bool,
        on_line: Callable[[str], None],
        buildargs: dict[str, str] | None = None,
        platform: str | None = None,
    ) -> str:
        self.calls.append(("build", Path(context).name))
        self.platform = platform
        self.buildargs = dict(buildargs or {})
        self.build_tag = tag
        on_line("Step 1/2 : FROM base")
        if self.fail:
            raise EngineError(self.fail)
        on_line("Step 2/2 : CMD x")
        built = self._add(builder_config(len(self.calls)))
        if tag:  # the engine tags a build only when it succeeds
            self.images[tag] = ImageInfo(id=built, tags=(tag,), labels={}, size=2**20, layers=())
        return built

    def _add(self, config: bytes) -> str:
        built = image_id(config)
        self.configs[built] = config
        self.images[built] = ImageInfo(id=built, tags=(), labels={}, size=2**20, layers=())
        return built

    def image_config(self, image_id: str) -> bytes:
        self.calls.append(("save", image_id))
        return self.configs[image_id]

    def load_config(self, config: bytes) -> str:
        self.calls.append(("load", image_id(config)))
        if self.load_fails is not None:
            raise self.load_fails
        return self._add(config)

    def tag(self, image_id: str, reference: str) -> None:
        self.calls.append(("tag", reference))
        self.images[reference] = ImageInfo(id=image_id, tags=(reference,), labels={}, size=2**20, layers=())

    def remove(self, reference: str) -> None:
        """As `docker rmi`: a tag goes; the image goes with its last tag (or when named by its id)."""
        self.calls.append(("remove", reference))
        info = self.images.pop(reference, None)
        if info is not None and not any(i.id == info.id for r, i in self.images.items() if r != info.id):
            self.images.pop(info.id, None)

    def run(self, spec: RunSpec, on_line: Callable[[str], None], on_error: Callable[[str], None] | None = None) -> int:
        return 0

    def push(self, reference: str, on_line: Callable[[str], None]) -> None:
        self.calls.append(("push", reference))
        self.registry.add(reference)

    def registry_has(self, reference: str) -> bool:
        return reference in self.registry

    def publish_index(self, remote: str, platform_tags: dict[str, str]) -> tuple[str, bool]:
        self.calls.append(("index", remote, *(f"{p}={t}" for p, t in sorted(platform_tags.items()))))
        written = remote not in self.indexes
        self.indexes[remote] = dict(platform_tags)
        return "sha256:" + "0" * 64, written

    def pull(self, reference: str, on_line: Callable[[str], None]) -> None:
        raise EngineError(f"pull of {reference} failed: no registry here")


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def plan(matrix: Matrix, env: str = "cpu-py311", lock: str = LOCK) -> BuildPlan:
    text = (REFERENCE_MATRIX).read_text()
    return plan_build(
        matrix, matrix.envs[env], matrix_text=text, lock=lock, image_lock=IMAGE_LOCK, accelenv_source="src", base=BASE
    )


def no_context(plan: BuildPlan, context: Path) -> None:
    context.mkdir(parents=True)


def build(engine: FakeEngine, plans: list[BuildPlan], tmp_path: Path, **kwargs: object) -> list[object]:
    options: dict[str, object] = {"nocache": False, "dry_run": False, "push": None, **kwargs}
    options.setdefault("publish", engine.publish_index)  # the registry the fake keeps, not one on the network
    return list(
        build_images(
            engine,
            plans,
            source=REPO,
            logs=tmp_path / "logs",
            out=io.StringIO(),
            assemble_context=no_context,
            **options,  # type: ignore[arg-type]
        )
    )


def test_content_addressed_build_then_skip(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine()
    p = plan(matrix)
    (first,) = build(engine, [p], tmp_path)
    assert first.status == "built"  # type: ignore[attr-defined]
    assert p.content_tag in engine.images
    assert p.human_tag in engine.images
    (second,) = build(engine, [p], tmp_path)
    assert second.status == "skipped"  # type: ignore[attr-defined]
    assert [c for c in engine.calls if c[0] == "build"] == [("build", "context")]


def test_the_image_gets_the_id_of_its_canonical_config_build_after_build(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine()
    p = plan(matrix)
    first, second = (build(engine, [p], tmp_path, nocache=True)[0] for _ in range(2))
    builders = [c[1] for c in engine.calls if c[0] == "save"]
    assert len(set(builders)) == 2  # the builder's ids differ: its times and containers do
    expected = image_id(normalise(engine.configs[builders[0]], epoch=p.epoch))
    assert first.image_id == second.image_id == expected  # type: ignore[attr-defined]
    assert first.reproducible_id is True  # type: ignore[attr-defined]
    assert engine.images[p.content_tag].id == engine.images[p.human_tag].id == expected
    assert not set(builders) & set(engine.images)  # the builder's images are gone
    assert [c[0] for c in engine.calls][:7] == ["build", "save", "load", "tag", "tag", "tag", "remove"]
    assert not [r for r in engine.images if r.startswith(HOLD_REPOSITORY)]
    canonical = json.loads(engine.configs[expected])
    assert canonical["created"] == "2025-06-01T12:00:00Z"  # the base's time: SOURCE_DATE_EPOCH
    assert [h["created"] for h in canonical["history"]] == ["2025-06-01T12:00:00.1Z", "2025-06-01T12:00:00Z"]
    assert "reproducible image id sha256:" in Path(first.log).read_text()  # type: ignore[attr-defined]


def test_an_engine_that_cannot_load_the_config_keeps_the_builders_image(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine(load_fails=EngineError("the engine did not load sha256:x: layer.tar: no such file"))
    p = plan(matrix)
    out = io.StringIO()
    (result,) = build_images(
        engine, [p], source=REPO, logs=tmp_path, out=out, nocache=False, dry_run=False, push=None,
        assemble_context=no_context,
    )  # fmt: skip
    built = next(c[1] for c in engine.calls if c[0] == "save")
    assert (result.status, result.image_id, result.reproducible_id) == ("built", built, False)
    assert engine.images[p.content_tag].id == built
    assert built in engine.images  # its hold tag went, its content tag stays
    assert not [r for r in engine.images if r.startswith(HOLD_REPOSITORY)]
    assert "warning: the image id is not reproducible (the builder's, " in out.getvalue()
    assert "WARNING: the image keeps the builder's id" in (tmp_path / "cpu-py311.log").read_text()


def test_without_a_reproducible_id_nothing_is_saved_or_loaded(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine()
    (result,) = build(engine, [plan(matrix)], tmp_path, reproducible_id=False)
    assert result.reproducible_id is False  # type: ignore[attr-defined]
    assert [c[0] for c in engine.calls] == ["build", "tag", "tag", "tag", "remove"]  # content, <human>-amd64, human
    assert engine.calls[-1] == ("remove", engine.build_tag)  # the hold tag only: the image stays under its own
    assert result.image_id in engine.images  # type: ignore[attr-defined]


def test_an_interrupt_while_the_id_is_made_leaves_no_tag(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine(load_fails=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        build(engine, [plan(matrix)], tmp_path)
    assert not [c for c in engine.calls if c[0] == "tag"]
    assert "FAILED: interrupted" in (tmp_path / "logs" / "cpu-py311.log").read_text()


def test_a_builder_image_tagged_by_someone_stays(matrix: Matrix, tmp_path: Path) -> None:
    """Another build of the same content got the same image from the cache and holds it: this build's clean-up
    removes its own hold tag only, and the other build can still tag what it built."""

    class Shared(FakeEngine):
        def build(self, context: str, **kwargs: Any) -> str:
            built = super().build(context, **kwargs)
            self.images["accelenv-build-hold:cpu-py311-other"] = ImageInfo(
                id=built, tags=("accelenv-build-hold:cpu-py311-other",), labels={}, size=1, layers=()
            )
            return built

    engine = Shared()
    (result,) = build(engine, [plan(matrix)], tmp_path)
    built = next(c[1] for c in engine.calls if c[0] == "save")
    assert result.image_id != built  # type: ignore[attr-defined]
    assert built in engine.images
    assert engine.build_tag not in engine.images
    assert engine.images["accelenv-build-hold:cpu-py311-other"].id == built


def test_normalise_image_gives_the_canonical_config_and_leaves_the_builders_image() -> None:
    engine = FakeEngine()
    built = engine._add(builder_config(1))
    new = normalise_image(engine, built, epoch=0)
    assert new != built
    assert built in engine.images
    assert json.loads(engine.configs[new])["created"] == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize("registry_fails", [False, True])
def test_the_hold_tag_goes_however_the_build_ends(matrix: Matrix, tmp_path: Path, registry_fails: bool) -> None:
    """Built and pushed, or built and the push refused: the image was held under a tag of its own while accelenv
    worked on it, and the tag is gone afterwards."""

    class Pushing(FakeEngine):
        def push(self, reference: str, on_line: Callable[[str], None]) -> None:
            if registry_fails:
                raise EngineError("push refused: denied")
            super().push(reference, on_line)

    engine = Pushing()
    (result,) = build(engine, [plan(matrix)], tmp_path, push="registry.example/acme")
    assert result.status == ("failed" if registry_fails else "built")  # type: ignore[attr-defined]
    assert engine.build_tag is not None
    assert engine.build_tag.startswith(f"{HOLD_REPOSITORY}:cpu-py311-")
    assert ("remove", engine.build_tag) in engine.calls
    assert not [r for r in engine.images if r.startswith(HOLD_REPOSITORY)]


def test_a_failed_build_leaves_no_tag(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine(fail="the build failed: RUN exited 1")
    p = plan(matrix)
    (result,) = build(engine, [p], tmp_path)
    assert result.status == "failed"  # type: ignore[attr-defined]
    assert engine.images == {}
    log = Path(result.log).read_text()  # type: ignore[attr-defined]
    assert "Step 1/2 : FROM base" in log
    assert "FAILED: the build failed: RUN exited 1" in log


LOST = "the build failed: failed to export image: failed to set parent sha256:9f: unknown parent image ID sha256:9f"


@pytest.mark.parametrize(
    ("errors", "status", "builds"),
    [
        ([LOST], "built", 2),  # a cached layer removed meanwhile: built again, once
        ([LOST, LOST], "failed", 2),  # lost again: the second failure is the answer
        (["the build failed: No such image: sha256:0b5e"], "built", 2),  # lost before a step's container
        (["the base image is not available: No such image: acme/base:1"], "failed", 1),  # a base is no cache
        (["the build failed: RUN exited 1"], "failed", 1),  # any other failure is not tried again
    ],
)
def test_a_build_that_lost_a_cached_layer_is_built_again_once(
    matrix: Matrix, tmp_path: Path, errors: list[str], status: str, builds: int
) -> None:
    class Losing(FakeEngine):
        def build(self, context: str, **kwargs: Any) -> str:
            if errors:
                self.fail = errors.pop(0)
            else:
                self.fail = None
            return super().build(context, **kwargs)

    engine = Losing()
    (result,) = build(engine, [plan(matrix)], tmp_path)
    assert result.status == status  # type: ignore[attr-defined]
    assert [c for c in engine.calls if c[0] == "build"] == [("build", "context")] * builds
    log = Path(result.log).read_text()  # type: ignore[attr-defined]
    assert log.count("Step 1/2 : FROM base") == builds
    assert ("lost a cached layer" in log) == (builds == 2)


def test_context_failure_is_a_failed_build_not_a_crash(matrix: Matrix, tmp_path: Path) -> None:
    def broken(plan: BuildPlan, context: Path) -> None:
        raise BuildError("downloading the locked wheels of cpu-py311 failed: hash mismatch")

    engine = FakeEngine()
    results = build_images(
        engine,
        [plan(matrix)],
        source=REPO,
        logs=tmp_path / "logs",
        out=io.StringIO(),
        nocache=False,
        dry_run=False,
        push=None,
        assemble_context=broken,
    )
    assert results[0].status == "failed"
    assert "hash mismatch" in results[0].reason
    assert engine.images == {}


def test_dry_run_builds_nothing(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine()
    (result,) = build(engine, [plan(matrix)], tmp_path, dry_run=True)
    assert result.status == "planned"  # type: ignore[attr-defined]
    assert engine.calls == []


def test_push_skips_what_the_registry_has(matrix: Matrix, tmp_path: Path) -> None:
    p = plan(matrix)
    engine = FakeEngine()
    build(engine, [p], tmp_path, push="registry.example:5000/team")
    assert ("push", f"registry.example:5000/team/{p.content_tag}") in engine.calls
    assert ("push", f"registry.example:5000/team/{p.human_tag}-amd64") in engine.calls
    # the plain human tag is the multi-platform index, written through the registry API, not pushed
    assert ("push", f"registry.example:5000/team/{p.human_tag}") not in engine.calls
    tag = p.content_tag.rpartition(":")[2]
    assert ("index", f"registry.example:5000/team/{p.human_tag}", f"linux/amd64={tag}") in engine.calls
    engine.calls.clear()
    (again,) = build(engine, [p], tmp_path, push="registry.example:5000/team")
    assert again.status == "skipped"  # type: ignore[attr-defined]
    assert again.index == f"registry.example:5000/team/{p.human_tag}"  # type: ignore[attr-defined]
    assert not [c for c in engine.calls if c[0] in ("build", "push")]


def test_a_local_image_missing_from_the_registry_is_pushed_not_rebuilt(matrix: Matrix, tmp_path: Path) -> None:
    p = plan(matrix)
    engine = FakeEngine()
    build(engine, [p], tmp_path)
    engine.calls.clear()
    (result,) = build(engine, [p], tmp_path, push="registry.example:5000/team")
    assert result.status == "skipped"  # type: ignore[attr-defined]
    assert [c[0] for c in engine.calls if c[0] in ("build", "push")] == ["push", "push"]


def test_content_hash_follows_what_goes_in(matrix: Matrix) -> None:
    a = plan(matrix)
    assert plan(matrix).content_hash == a.content_hash
    assert plan(matrix, lock=LOCK + "\n# changed\n").content_hash != a.content_hash


def test_another_envs_change_does_not_touch_this_image(matrix: Matrix) -> None:
    text = (REFERENCE_MATRIX).read_text()
    changed = text.replace(
        'requirements.packages = ["torch==2.9.1+cu126"', 'requirements.packages = ["torch==2.9.0+cu126"'
    )
    assert changed != text
    env = matrix.envs["cpu-py311"]
    common = {"lock": LOCK, "image_lock": IMAGE_LOCK, "accelenv_source": "src", "base": BASE}
    before = plan_build(matrix, env, matrix_text=text, **common)  # type: ignore[arg-type]
    after = plan_build(matrix, env, matrix_text=changed, **common)  # type: ignore[arg-type]
    assert before.content_hash == after.content_hash


@pytest.mark.parametrize("env", ["cpu-py311", "gpu-nvidia-cu129", "gaudi-1-23"])
def test_sub_matrix_is_valid_and_holds_one_env(env: str) -> None:
    validation = validate_text(sub_matrix((REFERENCE_MATRIX).read_text(), env))
    assert [p.render("sub") for p in validation.problems if p.is_error] == []
    assert validation.matrix is not None
    assert list(validation.matrix.envs) == [env]
    assert validation.matrix.envs[env].default


def test_tags(matrix: Matrix) -> None:
    assert human_tag("accelenv", matrix, matrix.envs["gpu-nvidia-cu128"]) == "accelenv:gpu-nvidia-cu128-py312"
    assert human_tag("accelenv", matrix, matrix.envs["tpu-jax-0-8"]) == "accelenv:tpu-jax-0-8-py312"
    assert human_tag("accelenv", matrix, matrix.envs["cpu-py311"]) == "accelenv:cpu-py311-py311"
    assert plan(matrix).content_tag.startswith("accelenv:cpu-py311-")


def test_build_order_groups_shared_bases(matrix: Matrix) -> None:
    text = (REFERENCE_MATRIX).read_text()
    plans = [
        plan_build(
            matrix,
            matrix.envs[e],
            matrix_text=text,
            lock=LOCK,
            image_lock=IMAGE_LOCK,
            accelenv_source="s",
            base=BASE,
            os_lock=_os_lock(BASE.id),
        )
        for e in ("gpu-nvidia-cu130", "cpu-py311", "gpu-nvidia-cu128", "gaudi-1-23")
    ]
    bases = [p.base_image for p in build_order(plans)]
    assert bases == sorted(bases)


def test_pip_platforms() -> None:
    tags = pip_platforms("linux/amd64", "2.36")
    assert tags[0] == "manylinux_2_36_x86_64"
    assert tags[-1] == "manylinux2014_x86_64"
    assert "manylinux_2_17_x86_64" in tags


def test_locked_pins_reads_markers() -> None:
    text = (
        "# header\n--extra-index-url https://x\n"
        "numpy==2.5.5 ; platform_machine == 'x86_64' \\\n    --hash=sha256:a\nray==2.60.0 \\\n"
    )
    assert locked_pins(text) == [("numpy", "2.5.5"), ("ray", "2.60.0")]


def test_source_hash_is_stable() -> None:
    assert source_hash(REPO) == source_hash(REPO)


@pytest.mark.parametrize(
    "case",
    [
        ("gpu-nvidia-cu128", [], [], True, None, {"NVIDIA_VISIBLE_DEVICES": "all"}),
        ("gpu-amd-rocm64", ["/dev/dri", "/dev/kfd"], ["video", "render"], False, None, {}),
        ("neuron-2-31", ["/dev/neuron0"], [], False, None, {}),
        ("tpu-jax-0-8", ["/dev/vfio/0", "/dev/vfio/vfio"], [], False, None, {}),
        ("gaudi-1-23", [], [], False, "habana", {"HABANA_VISIBLE_DEVICES": "all"}),
    ],
)
def test_run_wires_devices_from_the_matrix(
    matrix: Matrix, tmp_path: Path, case: tuple[str, list[str], list[str], bool, str | None, dict[str, str]]
) -> None:
    env, devices, groups, gpus, runtime, variables = case
    host = tmp_path / "host"
    for node in ("dev/kfd", "dev/dri/renderD128", "dev/neuron0", "dev/vfio/0", "dev/vfio/vfio"):
        (host / node).parent.mkdir(parents=True, exist_ok=True)
        (host / node).write_text("")
    spec = run_spec(matrix, matrix.envs[env], "img", ["true"], root=Root(host), workdir=tmp_path)
    assert spec.devices == devices
    assert spec.group_add == groups
    assert spec.gpus is gpus
    assert spec.runtime == runtime
    assert variables.items() <= spec.environment.items()
    assert spec.volumes == {str(tmp_path): "/workspace"}
    owner = tmp_path.stat()
    assert spec.user == f"{owner.st_uid}:{owner.st_gid}"  # files written in /workspace belong to its owner
    assert spec.shm_size == "8g"
    assert spec.environment["HOME"] == "/tmp"


def test_run_takes_shm_and_ipc_from_the_family(tmp_path: Path) -> None:
    """/dev/shm and the IPC namespace are family data: the shipped matrix gives AMD and Gaudi the host's IPC
    namespace (no size: /dev/shm is the host's), NVIDIA a private /dev/shm of the default size; --shm-size
    overrides a size and is refused where there is none to set."""
    from accelenv.errors import UsageError

    repo = Path(__file__).resolve().parents[2]
    text = (repo / "matrix.toml").read_text()
    shipped = validate_text(text).matrix
    assert shipped is not None

    def spec_of(m: Matrix, env: str, shm: str | None = None) -> RunSpec:
        return run_spec(m, m.envs[env], "img", ["true"], root=Root(tmp_path), workdir=tmp_path, shm_size=shm)

    nvidia = spec_of(shipped, "gpu-nvidia-cu132")
    assert (nvidia.shm_size, nvidia.ipc_mode) == ("8g", None)
    assert spec_of(shipped, "gpu-nvidia-cu132", "32g").shm_size == "32g"
    for env in ("gaudi-1-23", "gpu-amd-rocm100"):
        assert (spec_of(shipped, env).shm_size, spec_of(shipped, env).ipc_mode) == (None, "host")
    with pytest.raises(UsageError, match="--shm-size does not apply to gaudi's containers: they share the host's IPC"):
        spec_of(shipped, "gaudi-1-23", "16g")
    sized = validate_text(text.replace("container_gpus = true", 'container_gpus = true\ncontainer_shm_size = "16g"'))
    assert sized.matrix is not None
    assert spec_of(sized.matrix, "gpu-nvidia-cu132").shm_size == "16g"
    assert spec_of(sized.matrix, "gpu-nvidia-cu132", "4g").shm_size == "4g"


def test_summary_counts() -> None:
    assert summary([]) == "0 built, 0 up to date, 0 failed; 0 MiB in all"


def test_an_interrupted_build_leaves_no_tag(matrix: Matrix, tmp_path: Path) -> None:
    class Interrupted(FakeEngine):
        def build(
            self,
            context: str,
            *,
            tag: str | None,
            nocache: bool,
            on_line: Callable[[str], None],
            buildargs: dict[str, str] | None = None,
            platform: str | None = None,
        ) -> str:
            on_line("Step 1/2 : FROM base")
            raise KeyboardInterrupt

    engine = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        build(engine, [plan(matrix)], tmp_path)
    assert engine.images == {}
    assert "FAILED: interrupted" in (tmp_path / "logs" / "cpu-py311.log").read_text()


def test_disk_full_is_named(matrix: Matrix, tmp_path: Path) -> None:
    from accelenv.build.engine import _build_failure

    message = _build_failure("write /var/lib/docker/tmp/x: no space left on device")
    assert message.startswith("the build ran out of disk space")
    assert "docker system prune" in message


# ---------------------------------------------------------------------------------------------------- hermetic


def test_the_build_starts_from_the_pinned_base_at_the_bases_time(matrix: Matrix, tmp_path: Path) -> None:
    engine = FakeEngine()
    p = plan(matrix)
    assert p.base_pin == BASE.id
    assert p.epoch == 1748779200  # 2025-06-01T12:00:00Z
    build(engine, [p], tmp_path)
    assert engine.buildargs == {"BASE_IMAGE": BASE.id, "SOURCE_DATE_EPOCH": "1748779200"}


@pytest.mark.parametrize(
    ("created", "epoch"),
    [
        ("2025-06-01T12:00:00Z", 1748779200),
        ("2025-06-01T12:00:00.5+02:00", 1748772000),
        ("0001-01-01T00:00:00Z", 0),  # docker's zero time
        ("yesterday", 0),
        ("", 0),
    ],
)
def test_epoch_of(created: str, epoch: int) -> None:
    assert epoch_of(created) == epoch


def test_the_base_and_accelenvs_dependencies_are_part_of_the_content(matrix: Matrix) -> None:
    a = plan(matrix)
    text = (REFERENCE_MATRIX).read_text()
    env = matrix.envs["cpu-py311"]
    other_base = BaseImage(id="sha256:" + "c" * 64, digest=None, created=BASE.created)
    rebased = plan_build(
        matrix, env, matrix_text=text, lock=LOCK, image_lock=IMAGE_LOCK, accelenv_source="src", base=other_base
    )
    assert rebased.content_hash != a.content_hash
    small = "six==1.17.0 \\\n    --hash=sha256:" + "a" * 64 + "\n"
    kept = plan_build(
        matrix, env, matrix_text=text, lock=small, image_lock=IMAGE_LOCK, accelenv_source="src", base=BASE
    )
    assert "jsonschema==" in kept.image_requirements  # the env does not pin it: the image lock's entry goes in
    relocked = plan_build(
        matrix,
        env,
        matrix_text=text,
        lock=small,
        image_lock=IMAGE_LOCK.replace("jsonschema==", "jsonschema==0"),
        accelenv_source="src",
        base=BASE,
    )
    assert relocked.content_hash != kept.content_hash


def test_a_base_without_the_python_needs_an_os_lock(matrix: Matrix) -> None:
    text = (REFERENCE_MATRIX).read_text()
    env = matrix.envs["gpu-nvidia-cu128"]
    with pytest.raises(
        BuildError,
        match=r"gpu-nvidia-cu128: its base nvidia/cuda:.* lacks Python 3\.12, and its OS "
        r"packages are not locked \(envs/gpu-nvidia-cu128/os-packages\.lock is missing\)",
    ):
        plan_build(matrix, env, matrix_text=text, lock=LOCK, image_lock=IMAGE_LOCK, accelenv_source="s", base=BASE)


def _os_lock(pin: str, architecture: str = "amd64") -> OsLock:
    package = OsPackage(
        name="python3.12", version="3.12.3-1", architecture=architecture, size=10, sha256="a" * 64,
        url="http://archive.ubuntu.com/ubuntu/pool/main/p/python3.12/python3.12_3.12.3-1_amd64.deb",
    )  # fmt: skip
    return OsLock(base="nvidia/cuda:x", pin=pin, architecture=architecture, packages=(package,))


def test_an_os_lock_from_another_base_or_architecture_is_refused(matrix: Matrix) -> None:
    text = (REFERENCE_MATRIX).read_text()
    env = matrix.envs["gpu-nvidia-cu128"]
    common = {"matrix_text": text, "lock": LOCK, "image_lock": IMAGE_LOCK, "accelenv_source": "s", "base": BASE}
    with pytest.raises(BuildError, match=r"was made from .* pinned sha256:dddd.*run `accelenv lock gpu-nvidia-cu128"):
        plan_build(matrix, env, os_lock=_os_lock("sha256:" + "d" * 64), **common)  # type: ignore[arg-type]
    with pytest.raises(BuildError, match=r"covers arm64, not linux/amd64"):
        plan_build(matrix, env, os_lock=_os_lock(BASE.id, "arm64"), **common)  # type: ignore[arg-type]
    ok = plan_build(matrix, env, os_lock=_os_lock(BASE.id), os_lock_text="x", **common)  # type: ignore[arg-type]
    assert ok.os_lock is not None
    assert "COPY os-packages/ /tmp/accelenv-os/" in ok.dockerfile


def test_split_lock_puts_framework_sized_wheels_first() -> None:
    lock = "torch==2.9.1 \\\n    --hash=sha256:aa\nsix==1.17.0 \\\n    --hash=sha256:bb\n"
    large, rest = split_lock(lock, {"torch": 900 * 2**20, "six": 11_000})
    assert large == "torch==2.9.1 \\\n    --hash=sha256:aa\n"
    assert rest == "six==1.17.0 \\\n    --hash=sha256:bb\n"
    assert split_lock(lock, {}) == ("", lock)


def test_image_requirements_skip_what_the_env_pins_and_evaluate_markers() -> None:
    image_lock = (
        "packaging==26.0 \\\n    --hash=sha256:aa\n"
        "typing-extensions==4.15.0 ; python_full_version < '3.13' \\\n    --hash=sha256:bb\n    # via referencing\n"
        "rpds-py==1.0 \\\n    --hash=sha256:cc\n"
    )
    env_lock = "packaging==25.0 \\\n    --hash=sha256:dd\n"
    old = image_requirements(image_lock, env_lock, python="3.11", machine="x86_64")
    assert old == "typing-extensions==4.15.0 \\\n    --hash=sha256:bb\nrpds-py==1.0 \\\n    --hash=sha256:cc\n"
    assert image_requirements(image_lock, env_lock, python="3.14", machine="aarch64") == (
        "rpds-py==1.0 \\\n    --hash=sha256:cc\n"
    )


DEBIAN = "http://deb.debian.org/debian/pool/main"
APT_OUTPUT = f"""amd64
@@uris
'{DEBIAN}/p/python3.11/python3.11_3.11.2-6%2bdeb12u8_amd64.deb' python3.11_3.11.2-6+deb12u8_amd64.deb 574236 \
MD5Sum:d2b6cecbc9b46432f80085aeef98eb1c
'{DEBIAN}/m/media-types/media-types_10.0.0_all.deb' media-types_10.0.0_all.deb 26136 \
MD5Sum:90fd2adb74d07dcc8875d93b1fa12833
@@records
Package: python3.11
Version: 3.11.2-6+deb12u8
Architecture: amd64
Description: Interactive high-level object-oriented language
 (version 3.11)
SHA256: 1111111111111111111111111111111111111111111111111111111111111111

Package: media-types
Version: 10.0.0
SHA256: 2222222222222222222222222222222222222222222222222222222222222222
"""  # the shape of apt 2.6's answer in Debian 12 (hashes shortened to placeholders)


def test_parse_apt_output_and_the_lock_round_trip() -> None:
    architecture, packages = parse_apt_output(APT_OUTPUT)
    assert architecture == "amd64"
    assert [(p.name, p.version, p.architecture, p.size) for p in packages] == [
        ("python3.11", "3.11.2-6+deb12u8", "amd64", 574236),
        ("media-types", "10.0.0", "all", 26136),
    ]
    assert packages[0].filename == "python3.11_3.11.2-6+deb12u8_amd64.deb"
    lock = OsLock(base="debian:12", pin="sha256:" + "e" * 64, architecture="amd64", packages=tuple(packages))
    text = render_os_lock("env", ("python3.11",), lock)
    assert parse_os_lock(text, where="os-packages.lock") == OsLock(
        base=lock.base, pin=lock.pin, architecture="amd64", packages=tuple(sorted(packages, key=lambda p: p.name))
    )


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("amd64\n", "apt's answer has no URI list"),
        ("amd64\n@@uris\n@@records\n", "apt named no package to fetch"),
        (APT_OUTPUT.replace("SHA256: 1111111111111111111111111111111111111111111111111111111111111111", ""),
         "apt gave no SHA256 for python3.11 3.11.2-6\\+deb12u8"),
    ],
)  # fmt: skip
def test_parse_apt_output_refuses_what_it_cannot_pin(output: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_apt_output(output)


@pytest.mark.parametrize(
    "line",
    [
        "python3 3.11 amd64 10 sha256:abc http://x/y.deb",  # short hash
        "python3 3.11 amd64 10 sha256:" + "a" * 64 + " file:///etc/passwd",  # not http(s)
        "python3 3.11 amd64 10 sha256:" + "a" * 64 + " http://x/y.deb; rm -rf /",
    ],
)
def test_a_malformed_os_lock_line_is_an_error_naming_the_line(line: str) -> None:
    text = "# base: debian:12 pinned sha256:" + "e" * 64 + "\n\n" + line + "\n"
    with pytest.raises(ValueError, match=r"\Aenvs/x/os-packages.lock:3: not `name version"):
        parse_os_lock(text, where="envs/x/os-packages.lock")


@pytest.mark.parametrize(
    ("caller", "owner", "expected"),
    [
        ((1001, 1001), (1001, 1001), (1001, 1001)),  # in one's own tree
        ((4242, 100), (0, 0), (4242, 100)),  # in a folder root owns but the caller may write to (/tmp)
        ((4242, 100), (1000, 1000), (4242, 100)),  # in someone else's tree: files are the caller's
        ((0, 0), (1000, 1000), (1000, 1000)),  # sudo accelenv run in a user's tree: files stay the user's
        ((0, 0), (0, 0), (0, 0)),
    ],
)
def test_the_container_runs_as_the_caller_or_under_sudo_as_the_trees_owner(
    caller: tuple[int, int], owner: tuple[int, int], expected: tuple[int, int]
) -> None:
    from accelenv.build.images import container_user

    assert container_user(caller, owner) == expected
