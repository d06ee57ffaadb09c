"""Podman through DOCKER_HOST, for real: Debian's podman started as `podman system service` on a unix socket in a
temporary folder (rootful, its storage in the folder: --root/--runroot, vfs, cgroupfs, and a containers.conf
without default ulimits, which this sandbox refuses), the base image loaded from the Docker engine. Then
accelenv's own build, verify, run and prune against it, and the device wiring Podman can and cannot take.

The service is ended by its process id. Under CI=true a missing podman, engine or base image fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
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
    storage = ["--root", str(folder / "root"), "--runroot", str(folder / "run"), "--storage-driver", "vfs"]
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
        saved = subprocess.Popen(["docker", "save", BASE_IMAGE], stdout=subprocess.PIPE)
        loaded = subprocess.run(
            ["podman", *storage, "load"],
            stdin=saved.stdout,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        saved.wait(timeout=60)
        if saved.stdout is not None:
            saved.stdout.close()
        if saved.returncode != 0:
            unavailable(f"docker save {BASE_IMAGE} failed: is the Docker engine up and the base image made?")
        assert loaded.returncode == 0, loaded.stderr
        # .ci/run's base is a debootstrap tree in a `mktemp -d` folder, so the tar's `./` is mode 0700: Docker keeps
        # its own mode for the container's /, Podman applies the tar's, and a non-root user could run nothing
        (folder / "Containerfile").write_text(f"FROM {BASE_IMAGE}\nRUN chmod 755 /\n")
        fixed = subprocess.run(
            [
                "podman",
                *storage,
                "--cgroup-manager",
                "cgroupfs",
                "build",
                "--network",
                "none",
                "-t",
                BASE_IMAGE,
                "-f",
                str(folder / "Containerfile"),
                str(folder),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert fixed.returncode == 0, fixed.stderr[-2000:]
        yield f"unix://{socket}"
    finally:
        service.send_signal(signal.SIGTERM)  # by its pid: only the service this fixture started
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait(timeout=30)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)  # vfs storage is plain folders: nothing is mounted once it ends


def accelenv(matrix: Path, *args: str) -> int:
    return main(["--matrix", str(matrix), *args])


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

    # Known gap, pinned so that a fix shows: on Podman the image's / is mode 0700 (Podman takes the mode of / from
    # the layers, where the stage deltas copied onto / carry it; Docker keeps its own), so the image's user
    # (accelenv, uid 1000) can run nothing and verify's check inside the image fails. Root, as here, can.
    probe = "stat -c '%a %n' / /opt/venv/bin/accelenv"
    assert accelenv(matrix, "run", "ci-image", "--repository", repository, "--", "sh", "-c", probe) == 0
    assert capsys.readouterr().out == "700 /\n755 /opt/venv/bin/accelenv\n"
    assert accelenv(matrix, "verify", "ci-image", "--repository", repository) == 1
    assert 'exec: "accelenv": executable file not found in $PATH' in capsys.readouterr().err

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
    # Known gap, pinned so that a fix shows: prune finds none of the images it should remove on Podman (seen
    # once; not yet diagnosed: Podman names them localhost/<repository>:<tag>, which may not match --repository)
    assert pruned["removed"] == 0
