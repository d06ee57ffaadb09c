"""Podman through DOCKER_HOST, for real: Debian's podman started as `podman system service` on a unix socket in a
temporary folder (rootful, its storage in the folder: --root/--runroot, the kernel's overlay, cgroupfs, and a
containers.conf without default ulimits, which this sandbox refuses), the base image imported from the Docker
engine's. Then accelenv's own build, verify, run and prune against it, and the device wiring Podman can and cannot take.

The service is ended by its process id, and what its overlay storage left mounted in the folder is unmounted (only
mounts inside the test's own folders). Under CI=true a missing podman, engine or base image fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from localmatrix import BASE_IMAGE, local_matrix, unavailable

from accelenv.cli import main

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests/unit/data/cdi/nvidia-575.64.03.yaml"


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The DOCKER_HOST of a podman service of this module alone, the base image loaded into it."""
    if shutil.which("podman") is None:
        unavailable("podman is not installed (apt-get install podman)")
    if shutil.which("docker") is None:
        unavailable("the docker CLI is not installed: the base image comes from the Docker engine")
    folder = tmp_path_factory.mktemp("podman")
    conf = folder / "containers.conf"
    conf.write_text("[containers]\ndefault_ulimits = []\n")
    # podman refuses a runroot over 50 characters, and pytest's temporary folders can be longer than that
    runroot = Path(tempfile.mkdtemp(prefix="accelenv-podman-"))
    # overlay, not vfs: vfs copies the whole tree for each layer and each container (the test took 7 to 9 minutes)
    storage = ["--root", str(folder / "root"), "--runroot", str(runroot), "--storage-driver", "overlay"]
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    socket = folder / "podman.sock"
    log = (folder / "service.log").open("w")
    service = subprocess.Popen(
        ["podman", *storage, "--cgroup-manager", "cgroupfs", "system", "service", "--time", "0", f"unix://{socket}"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(100):
            if socket.exists() or service.poll() is not None:
                break
            time.sleep(0.1)
        if not socket.exists():
            pytest.fail(f"podman system service did not start: {(folder / 'service.log').read_text()[-2000:]}")
        saved = folder / "saved.tar"
        save = subprocess.run(
            ["docker", "save", "-o", str(saved), BASE_IMAGE], capture_output=True, text=True, timeout=300, check=False
        )
        if save.returncode != 0:
            unavailable(f"docker save {BASE_IMAGE} failed: is the Docker engine up and the base image made?")
        rootfs = folder / "rootfs.tar"
        open_root(saved, rootfs)
        saved.unlink()
        imported = subprocess.run(
            ["podman", *storage, "import", str(rootfs), BASE_IMAGE],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert imported.returncode == 0, imported.stderr
        rootfs.unlink()
        yield f"unix://{socket}"
    finally:
        service.send_signal(signal.SIGTERM)  # by its pid: only the service this fixture started
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait(timeout=30)
        log.close()
        left = unmount_under(folder, runroot)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(runroot, ignore_errors=True)
        assert left == [], f"mounts left under the test's folders: {left}"


def unmount_under(*folders: Path) -> list[str]:
    """Unmount every mount point inside `folders`, the deepest first: the overlay driver mounts its home on itself
    (and a container's tree while it runs) and a service ended by a signal leaves them. Returns those still mounted
    afterwards."""

    def points() -> list[str]:
        found = []
        for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
            point = line.split()[4].replace("\\040", " ")  # mountinfo writes a space in a path as \040
            if any(point == str(f) or point.startswith(f"{f}/") for f in folders):
                found.append(point)
        return found

    for point in sorted(points(), key=lambda p: p.count("/"), reverse=True):
        subprocess.run(["umount", point], capture_output=True, timeout=60, check=False)
    return points()


def open_root(saved: Path, rootfs: Path) -> None:
    """The one layer of the image in `saved` (a `docker save` archive), written to `rootfs` with its root entry
    (`./`) given mode 0755, as a registry's base has it.

    .ci/run's base is a debootstrap tree in a `mktemp -d` folder, so its layer's `./` has mode 0700. Docker gives a
    container's / a mode of its own; Podman gives each layer's root the mode of the layer below, the first one
    that of its archive's `./`, and the layers a build makes never carry / (`RUN chmod 755 /` commits an empty
    layer), so every image built on it would keep a / that only root may enter."""
    with tarfile.open(saved) as archive:
        manifest = archive.extractfile("manifest.json")
        assert manifest is not None, f"{saved} has no manifest.json"
        [layer] = [name for entry in json.load(manifest) for name in entry["Layers"]]  # docker import: one layer
        tree = archive.extractfile(layer)
        assert tree is not None, f"{saved} has no {layer}"
        with tarfile.open(fileobj=tree, mode="r|") as members, tarfile.open(rootfs, "w") as out:
            for member in members:
                if member.name == ".":
                    member.mode = 0o755
                out.addfile(member, members.extractfile(member) if member.isreg() else None)


def accelenv(matrix: Path, *args: str) -> int:
    return main(["--matrix", str(matrix), *args])


@pytest.mark.heavy(seconds=70)
def test_build_verify_run_prune_on_podman(
    podman: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", podman)
    matrix = local_matrix(tmp_path / "repo" / "matrix.toml", {"ci-image": ["six==1.17.0"]}, runtime="ci-bookworm")
    repository = "accelenv-podman-test"
    assert accelenv(matrix, "lock", "ci-image") == 0
    capsys.readouterr()

    assert accelenv(matrix, "build", "ci-image", "--repository", repository, "--json") == 0
    out, err = capsys.readouterr()
    result = json.loads(out)["results"][0]
    assert result["status"] == "built", (result, err[-3000:])
    assert "engine: unix://" in err

    # on Podman the image's / is its base's (see open_root): the image's own user (accelenv, uid 1000) runs
    # `accelenv check` inside it for verify
    probe = "stat -c '%a %n' / /opt/venv/bin/accelenv"
    assert accelenv(matrix, "run", "ci-image", "--repository", repository, "--", "sh", "-c", probe) == 0
    root_line, venv_line = capsys.readouterr().out.splitlines()
    assert int(root_line.split()[0], 8) & 0o005 == 0o005, root_line  # others may enter / (overlay gives it 555)
    assert venv_line == "755 /opt/venv/bin/accelenv"
    assert accelenv(matrix, "verify", "ci-image", "--repository", repository) == 0, capsys.readouterr()
    capsys.readouterr()

    script = "import six, os; print('six', six.__version__, os.getcwd(), os.getuid())"  # as the caller (root here)
    assert accelenv(matrix, "run", "ci-image", "--repository", repository, "--", "python", "-c", script) == 0
    out, err = capsys.readouterr()
    assert f"six 1.17.0 /workspace {os.getuid()}" in out, err
    assert "engine: Podman 4." in err
    assert "devices: CPU only needs no devices" in err

    # NVIDIA on Podman: no --gpus through its Docker API, so without a CDI spec the run is refused up front ...
    root = tmp_path / "host"
    root.mkdir()
    image = result["human_tag"]
    nvidia = ["run", "gpu-nvidia-cu132", "--image", image, "--stale-ok", "--root", str(root), "--", "true"]
    assert main(nvidia) == 125
    assert "Podman's Docker-compatible API takes no --gpus device request" in capsys.readouterr().err
    # ... and with one (in the tree the run reads) the CDI name reaches Podman's own CDI registry, which reads the
    # machine's /etc/cdi, where this test writes nothing: Podman's refusal proves the name got there as CDI
    (root / "etc/cdi").mkdir(parents=True)
    (root / "etc/cdi/nvidia.yaml").write_text(SPEC.read_text())
    for line in SPEC.read_text().splitlines():
        if line.strip().startswith(("hostPath:", "- path:", "path:")):
            host_path = line.split(":", 1)[1].strip()
            (root / host_path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / host_path.lstrip("/")).touch()
    assert main(nvidia) == 1
    err = capsys.readouterr().err
    assert "devices: CDI nvidia.com/gpu=all from /etc/cdi/nvidia.yaml, as devices (Podman's syntax)" in err
    assert "unresolvable CDI devices nvidia.com/gpu=all" in err

    assert accelenv(matrix, "prune", "--repository", repository, "--keep", "0", "--json") == 0
    pruned = json.loads(capsys.readouterr().out)
    assert pruned["failed"] == 0
    # Podman's Docker API tags `<repository>:<tag>` as docker.io/library/<repository>:<tag>: the same repository
    [image_pruned] = pruned["images"]
    assert {f"docker.io/library/{result['content_tag']}", f"docker.io/library/{image}"} <= {*image_pruned["tags"]}
    assert (pruned["removed"], image_pruned["action"], image_pruned["removed"]) == (1, "remove", True)
    assert accelenv(matrix, "prune", "--repository", repository, "--keep", "0", "--json") == 0
    assert json.loads(capsys.readouterr().out)["images"] == []
