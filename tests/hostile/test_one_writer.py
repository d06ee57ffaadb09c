"""Issue 28, writes: every file accelenv writes goes through `fileio.write_atomic`, which opens relative to a
folder descriptor, never follows a symlinked folder (or, inside the tree, a symlinked file), refuses what it
must not replace (non-regular, read-only, hard-linked) and keeps the owner and mode of what it replaces.

The first test enumerates the writers: no module but `fileio` may write a file by itself."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest
from hostilekit import accelenv, assert_clean_error

import accelenv as package
from accelenv.errors import UsageError
from accelenv.fileio import check_writable, write_atomic

PACKAGE = Path(package.__file__).parent

# Writes that do not go through the writer, and why that is sound. Everything else must use write_atomic.
ALLOWED = {
    # the build context: a private folder from tempfile.mkdtemp that only this process knows
    ("build/context.py", "write_text"),
    ("build/context.py", "open"),
    ("build/context.py", "rename"),
    # standard output closed: /dev/null stands in for it, so a print cannot fail
    ("cli/__init__.py", "os.open"),
    # an image tar written into an in-memory or caller-given stream, not a path
    ("build/image_config.py", "open"),
}
_WRITE_CALLS = {"write_text", "write_bytes", "replace", "rename", "symlink_to", "hardlink_to", "touch"}


def _writes(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        on_os = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "os"
        if on_os and name == "open":
            if {"O_WRONLY", "O_RDWR", "O_CREAT"} & {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}:
                found.append(("os.open", node.lineno))
        elif on_os and name in {"rename", "replace", "link", "symlink"}:
            found.append((f"os.{name}", node.lineno))
        elif _writes_by_path(name, node):
            found.append((name, node.lineno))
    return found


def _writes_by_path(name: str, node: ast.Call) -> bool:
    if name == "open":
        return _opens_for_writing(node)
    if name == "replace":
        return not _is_not_a_path_replace(node)
    return name in _WRITE_CALLS or name in {"mkstemp", "NamedTemporaryFile"}


def _is_not_a_path_replace(node: ast.Call) -> bool:
    """`text.replace("a", "b")` or `dataclasses.replace(x, field=...)`, not `Path.replace(target)`."""
    return len(node.args) != 1 or bool(node.keywords)


def _opens_for_writing(node: ast.Call) -> bool:
    values = [*node.args, *(k.value for k in node.keywords if k.arg == "mode")]
    modes = [str(a.value) for a in values if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return any(c in m for m in modes for c in "wax+")


def test_every_writer_goes_through_fileio() -> None:
    """Enumerates every call in the package that writes a file by path; only fileio.py (and the listed private
    temporary folders) may."""
    offenders = []
    for source in sorted(PACKAGE.rglob("*.py")):
        rel = source.relative_to(PACKAGE).as_posix()
        if rel == "fileio.py":
            continue
        for name, line in _writes(ast.parse(source.read_text(encoding="utf-8"))):
            if (rel, name) not in ALLOWED:
                offenders.append(f"{rel}:{line}: {name}")
    assert offenders == [], "write through accelenv.fileio.write_atomic instead:\n" + "\n".join(offenders)


def test_the_enumeration_sees_a_write() -> None:
    """The check above can fail: a module that writes by itself is found."""
    tree = ast.parse(
        "from pathlib import Path\nPath('x').write_text('y')\nopen('z', 'w')\nos.rename('a', 'b')\n"
        "os.open('r', os.O_RDONLY)\ns.replace('a', 'b')\n"
    )
    assert sorted(name for name, _ in _writes(tree)) == ["open", "os.rename", "write_text"]


# ---------------------------------------------------------------------------------------------------- the writer


def test_a_symlinked_folder_inside_the_tree_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "schema").symlink_to(outside)
    with pytest.raises(UsageError, match="is a symlink"):
        write_atomic(repo / "schema" / "matrix.schema.json", "{}\n", inside=repo)
    assert list(outside.iterdir()) == []


def test_a_folder_swapped_for_a_link_after_the_check_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No check-then-use: the folder is replaced by a symlink right after the words-only check ran."""
    from accelenv import fileio

    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    (repo / "images" / "x").mkdir(parents=True)
    real_check = fileio.check_inside

    def check_then_swap(path: Path, inside: Path) -> None:
        real_check(path, inside)
        (repo / "images" / "x").rmdir()
        (repo / "images" / "x").symlink_to(outside)

    monkeypatch.setattr(fileio, "check_inside", check_then_swap)
    with pytest.raises(UsageError, match="is a symlink or not a folder"):
        write_atomic(repo / "images" / "x" / "Dockerfile", "FROM x\n", inside=repo)
    assert list(outside.iterdir()) == []


def test_a_symlinked_file_inside_the_tree_is_refused(tmp_path: Path) -> None:
    """`refresh` wrote through a symlinked requirements.lock while `lock` refused it: now the writer refuses."""
    repo = tmp_path / "repo"
    (repo / "envs" / "e").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep\n")
    (repo / "envs" / "e" / "requirements.lock").symlink_to(elsewhere)
    with pytest.raises(UsageError, match=r"requirements\.lock: is a symlink"):
        write_atomic(repo / "envs" / "e" / "requirements.lock", "new\n", inside=repo)
    assert elsewhere.read_text() == "keep\n"


def test_missing_folders_are_created_inside_the_tree(tmp_path: Path) -> None:
    write_atomic(tmp_path / "a" / "b" / "c.txt", "x\n", inside=tmp_path)
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "x\n"


def test_a_read_only_file_is_not_replaced(tmp_path: Path) -> None:
    """Even by root, who could: a file its owner made read-only is not replaced behind their back."""
    target = tmp_path / "matrix.toml"
    target.write_text("old\n")
    target.chmod(0o444)
    with pytest.raises(UsageError, match=r"is read-only for you \(mode -r--r--r--\)"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"


def test_a_hard_linked_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "matrix.toml"
    target.write_text("old\n")
    (tmp_path / "other-name.toml").hardlink_to(target)
    with pytest.raises(UsageError, match="has 1 other hard link"):
        write_atomic(target, "new\n")
    assert (tmp_path / "other-name.toml").read_text() == "old\n"


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_check_writable_refuses_before_any_work(tmp_path: Path, kind: str) -> None:
    """`build` asks before building: a FIFO at .accelenv/build-logs/<env>.log is an error, not a hang."""
    logs = tmp_path / ".accelenv" / "build-logs"
    logs.mkdir(parents=True)
    target = logs / "e.log"
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    with pytest.raises(UsageError, match="accelenv writes only regular files"):
        check_writable(target, inside=tmp_path)


def test_mode_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "x.md"
    target.write_text("old\n")
    target.chmod(0o640)
    write_atomic(target, "new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.read_text() == "new\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_root_keeps_the_owner_of_what_it_replaces_and_gives_new_files_the_folders(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    os.chown(tree, 4321, 4321)
    existing = tree / "matrix.toml"
    existing.write_text("old\n")
    os.chown(existing, 1234, 1234)
    write_atomic(existing, "new\n")
    write_atomic(tree / "docs" / "new.md", "n\n", inside=tree)
    assert (existing.stat().st_uid, existing.stat().st_gid) == (1234, 1234)
    assert (tree / "docs").stat().st_uid == 4321
    assert (tree / "docs" / "new.md").stat().st_uid == 4321


# ---------------------------------------------------------------------------------------------------- commands


def test_schema_write_refuses_a_symlinked_schema_folder(matrix: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (matrix.parent / "schema").symlink_to(outside)
    result = accelenv("--matrix", str(matrix), "schema", "--write")
    assert_clean_error(result, code=2, says="is a symlink")
    assert list(outside.iterdir()) == []


def test_schema_write_refuses_a_symlinked_schema_file(matrix: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("keep\n")
    (matrix.parent / "schema").mkdir()
    (matrix.parent / "schema" / "matrix.schema.json").symlink_to(elsewhere)
    result = accelenv("--matrix", str(matrix), "schema", "--write")
    assert_clean_error(result, code=2, says="is a symlink")
    assert elsewhere.read_text() == "keep\n"


def test_detach_does_not_replace_a_read_only_matrix(matrix: Path) -> None:
    before = matrix.read_bytes()
    matrix.chmod(0o444)
    result = accelenv("--matrix", str(matrix), "detach", "h200", "gpu-nvidia-cu129")
    assert_clean_error(result, code=2, says="is read-only for you")
    assert matrix.read_bytes() == before


def test_attach_does_not_leave_old_content_under_a_hard_link(matrix: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.hardlink_to(matrix)
    result = accelenv("--matrix", str(matrix), "attach", "l4", "gpu-nvidia-cu129")
    assert_clean_error(result, code=2, says="other hard link")
    assert other.read_bytes() == matrix.read_bytes()
