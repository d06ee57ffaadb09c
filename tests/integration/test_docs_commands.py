"""Every command the README and docs/ show in a console block is run by a test: those that need nothing beyond
this machine are run here, exactly as written, in a copy of the repository, each document's commands in order
(a later one may use a file an earlier one wrote); those that need a container engine, a registry, an index or
debootstrap are run by the integration test named for them in ELSEWHERE, which this test holds to it.

A command passes when it exits 0, or 1 for a verdict (a `check` that fails on this machine, which has no GPU), and
prints no internal error; a usage error (2) or a bug (3) fails it. The Quick start's lines are run from a system
Python by test_quick_start.py."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from repocopy import copy_repository

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "compatibility.md")]
# commands that need what a unit of this test cannot have, and the integration test that runs each
ELSEWHERE = {
    "build": ("test_docker_images.py", "a container engine and a base image"),
    "verify": ("test_docker_images.py", "a container engine and a built image"),
    "run": ("test_docker_images.py", "a container engine and a built image"),
    "prune": ("test_prune_engine.py", "a container engine"),
    "pin": ("test_pin_registry.py", "a registry"),
    "lock": ("test_lock_index.py", "a package index and, for OS packages, the base image"),
    "outdated": ("../../noxfile.py", "package indexes and release feeds (the scheduled `nox -s outdated`)"),
    "refresh": ("test_refresh_loopback.py", "package indexes and release feeds"),
    "base": ("test_standin_route.py", "debootstrap and a Debian mirror"),
}
# commands of other tools the docs show, and the file that runs each (a CI step counts)
OTHER = {
    "python -m pytest tests/unit": ("tests/integration/test_vendor_example.py", "python -m pytest tests/unit"),
    "nox -s lint tests": (".ci/run", "nox -s lint tests"),
    "debootstrap --arch arm64": (".ci/run", "debootstrap --arch arm64"),
    "tar -C rootfs -cf rootfs.tar .": (".ci/run", "-m accelenv.build.platforms"),
    # the same suite `nox -s conformance-cpu` runs (cpusuite.run_suite over the conformance files, torch and JAX)
    "nox -s conformance-cpu": ("tests/integration/test_conformance_cpu.py", "run_suite"),
}


# console blocks that one test runs whole, by its tag (```console TAG): that test reads the block from the document
BLOCKS = {
    "worked-example": "tests/integration/test_vendor_example.py",
    "family-plugin": "tests/integration/test_family_plugin_guide.py",
    "node": "tests/integration/test_docs_commands.py",  # test_the_node_install_recipe_runs, below
}


def block_tags(path: Path) -> dict[int, str]:
    """line -> the tag of the console block it is in, for the lines of tagged blocks."""
    tags: dict[int, str] = {}
    tag = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            words = line.strip().split()
            tag = words[1] if line.startswith("```console") and len(words) == 2 else None
        elif tag is not None:
            tags[number] = tag
    return tags


def commands(path: Path) -> list[tuple[int, str]]:
    """(line, command) of every `$ ` line of a ```console block, continuation lines joined."""
    found: list[tuple[int, str]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    in_block, i = False, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = line.strip().startswith("```console")
        elif in_block and line.startswith("$ "):
            start, command = i + 1, line[2:]
            while command.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command.rstrip()[:-1] + " " + lines[i].strip()
            found.append((start, command))
        i += 1
    return found


def sketch(command: str) -> bool:
    """An example with a placeholder a reader fills in (`<ENV>`, `...`, `$(...)`): shown, not runnable."""
    return "<" in command or "..." in command or "$(" in command


def name_of(command: str) -> str:
    """The accelenv command a line runs; `cluster.local`; `git` (read-only, run in the repository itself); or
    `other` (another tool's, in OTHER)."""
    words = shlex.split(command, comments=True)
    if words[:3] == ["python", "-m", "accelenv.cluster.local"]:
        return "cluster.local"
    if words[:2] == ["git", "show"]:
        return "git"
    if words[0] != "accelenv":
        return "other"
    return next(w for w in words[1:] if not w.startswith("-"))


EXAMPLES = [(path, line, command) for path in DOCS for line, command in commands(path)]


def test_every_command_shown_is_run_here_or_by_the_test_named_for_it() -> None:
    assert len(EXAMPLES) > 60
    for path, line, command in EXAMPLES:
        tag = block_tags(path).get(line)
        if tag is not None:  # a block one test runs whole: that test reads the block by its fence
            assert tag in BLOCKS, f"{path.name}:{line}: ```console {tag}: no test runs this block (BLOCKS)"
            assert f"console {tag}" in (REPO / BLOCKS[tag]).read_text(encoding="utf-8"), (path.name, line)
            continue
        if sketch(command):
            continue
        name = name_of(command)
        if name == "other":
            (runner,) = [v for k, v in OTHER.items() if command.startswith(k)] or [("", "")]
            assert runner[0], f"{path.name}:{line}: `{command}` is in no test: add it to OTHER"
            assert runner[1] in (REPO / runner[0]).read_text(encoding="utf-8"), f"{path.name}:{line}: {runner}"
        elif name in ELSEWHERE:
            test, _ = ELSEWHERE[name]
            text = (REPO / "tests" / "integration" / test).read_text(encoding="utf-8")
            assert re.search(rf"[\"']{name}[\"']", text), f"{path.name}:{line}: {test} runs no `accelenv {name}`"


def _environ(home: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELENV_", "RAY_", "VIRTUAL_ENV"))}
    return {**environ, "PATH": f"{bin_dir}{os.pathsep}{environ.get('PATH', '')}", "HOME": str(home)}


def test_the_commands_of_the_docs_run_as_written(tmp_path: Path) -> None:
    """Every document's commands in one copy of the repository, the README's first, then docs/ by name (so
    `snapshot -o node7.json` in host-checks.md comes before scheduling.md's `--snapshot node7.json`). A command
    with `--ray` runs against a local cluster (`python -m accelenv.cluster.local`). `results/` and `artifacts/`
    stand for what an environment's session and a CI download leave: empty here (records themselves are read by
    test_conformance_cpu.py, which makes them)."""
    copy = tmp_path / "repo"
    copy_repository(REPO, copy)
    (copy / "results").mkdir()
    (copy / "artifacts").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    failures, ran = [], 0
    for doc in DOCS:
        tags = block_tags(doc)
        for line, command in commands(doc):
            name = "" if sketch(command) or line in tags else name_of(command)
            if name in ("", *ELSEWHERE, "cluster.local", "other"):
                continue
            shell = command
            if "--ray" in shlex.split(command, comments=True):
                shell = f"{sys.executable} -m accelenv.cluster.local --nodes 2 -- {command}"
            result = subprocess.run(
                ["bash", "-c", shell],
                cwd=REPO if name == "git" else copy,  # the copy has no history
                env=_environ(home),
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            ran += 1
            said = result.stdout[-2000:] + result.stderr[-2000:]
            if result.returncode not in (0, 1) or "internal error" in said or "Traceback" in result.stderr:
                failures.append(f"{doc.name}:{line}: `{command}` exited {result.returncode}:\n{said}")
    assert not failures, "\n\n".join(failures)
    assert ran > 40


def test_the_node_install_recipe_runs(tmp_path: Path) -> None:
    """docs/contributing-hardware.md's `console node` blocks, as a node's owner runs them, with /opt/accelenv and
    the Buildkite hooks folder under this test's folder, `sudo` dropped (the test runs as the user it has), and the
    release's source a copy of this repository (the clone line has placeholders). The install must give a working
    `accelenv`: its check, labels and both hooks run (the check may fail here, a host without the GPU: 1, never a
    traceback), and the hooks are written."""
    guide = REPO / "docs" / "contributing-hardware.md"
    opt = tmp_path / "opt" / "accelenv"
    hooks = tmp_path / "etc" / "buildkite-agent" / "hooks"
    hooks.mkdir(parents=True)
    tags = block_tags(guide)
    lines = [c for n, c in commands(guide) if tags.get(n) == "node" and not sketch(c)]
    assert any("pip install ./src" in c for c in lines), lines
    environ = _environ(tmp_path)
    for command in lines:
        shell = command.replace("/opt/accelenv", str(opt)).replace("/etc/buildkite-agent/hooks", str(hooks))
        shell = shell.removeprefix("sudo ")
        if "pip install ./src" in shell:
            copy_repository(REPO, opt / "src")
        result = subprocess.run(
            ["bash", "-c", shell],
            cwd=opt if opt.is_dir() else tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        said = f"`{command}` exited {result.returncode}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
        assert result.returncode in (0, 1), said
        assert "Traceback" not in result.stderr, said
        assert result.returncode == 0 or " check " in command, said  # only the host's verdict may be a no
    assert (opt / "job-started.sh").is_file()
    assert (hooks / "pre-command").is_file()


CLUSTER = [(p, line, c) for p, line, c in EXAMPLES if not sketch(c) and name_of(c) == "cluster.local"]


@pytest.mark.parametrize(("doc", "line", "command"), CLUSTER, ids=[f"{p.name}:{n}" for p, n, _ in CLUSTER])
def test_the_local_cluster_recipes_work(tmp_path: Path, doc: Path, line: int, command: str) -> None:
    pytest.importorskip("ray")
    environ = _environ(tmp_path)
    environ["ACCELENV_MATRIX"] = str(REPO / "matrix.toml")
    if " -- " in command:
        result = subprocess.run(
            ["bash", "-c", command], cwd=REPO, env=environ, capture_output=True, text=True, timeout=600, check=False
        )
        assert result.returncode == 0, f"{doc.name}:{line}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
        assert re.search(r"local Ray cluster: \d+ node\(s\) at 127\.0\.0\.1:\d+", result.stdout)
        assert "conform to cpu-py311" in result.stdout or '"conforming"' in result.stdout
        return
    # without a command it holds the cluster until Ctrl-C: wait for the address, then interrupt it
    with subprocess.Popen(
        shlex.split(command), cwd=REPO, env=environ, stdout=subprocess.PIPE, text=True, start_new_session=True
    ) as holder:
        assert holder.stdout is not None
        first = holder.stdout.readline()
        second = holder.stdout.readline()
        assert re.fullmatch(r"local Ray cluster: 2 node\(s\) at 127\.0\.0\.1:\d+ \(127\.0\.0\.1 only\)\n", first)
        assert second.startswith("RAY_ADDRESS=127.0.0.1:")
        os.killpg(holder.pid, signal.SIGINT)
        assert holder.wait(timeout=120) == 0
