"""The README's and the vendor guide's console examples stay true: every `accelenv` command shown parses with
today's command line and names environments the shipped matrix has, and the output the README shows for
`accelenv validate` is what it prints (its stable part: the counts)."""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest

from accelenv.cli import COMMANDS, build_parser, main
from accelenv.matrix import load_matrix

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "compatibility.md")]


def console_commands(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, command, the output lines shown under it) for each `$ accelenv` line of a console block."""
    out: list[tuple[int, str, list[str]]] = []
    in_block = False
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = line.strip() == "```console"
        elif in_block and line.startswith("$ accelenv"):
            start, command = i + 1, line[2:]
            while command.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command.rstrip()[:-1] + " " + lines[i].strip()
            shown = []
            while i + 1 < len(lines) and not lines[i + 1].startswith(("$", "```")):
                i += 1
                shown.append(lines[i])
            out.append((start, command, shown))
        i += 1
    return out


EXAMPLES = [(f"{p.name}:{n}", c, shown) for p in DOCS for n, c, shown in console_commands(p)]
# ids the docs' own `accelenv add` examples create: later examples may use them (the vendor guide chains them)
ADDED = {
    words[3]
    for _, command, _ in EXAMPLES
    if command.startswith("accelenv add ") and "..." not in command
    for words in [shlex.split(command, comments=True)]
    if len(words) > 3
}


def argv_of(command: str) -> list[str] | None:
    """The arguments after `accelenv`, or None for an example that only sketches (placeholders, `...`)."""
    if "$(" in command or "<" in command or "..." in command:
        return None
    words = shlex.split(command.split(" && ", maxsplit=1)[0], comments=True)
    for shell in ("|", ">"):  # `accelenv k8s ENV | kubectl apply -f -`, `accelenv ci ... > plan.json`: accelenv's part
        if shell in words:
            words = words[: words.index(shell)]
    return words[1:]


def test_the_docs_have_examples() -> None:
    assert len(EXAMPLES) > 20


RUNNABLE = [e for e in EXAMPLES if argv_of(e[1]) is not None]
SKETCHES = [e for e in EXAMPLES if argv_of(e[1]) is None]


def test_only_sketches_with_placeholders_are_left_out() -> None:
    """The examples the next test does not run are sketches, each with a placeholder a reader fills in."""
    assert len(SKETCHES) < len(RUNNABLE) / 4
    for where, command, _ in SKETCHES:
        assert "<" in command or "..." in command or "$(" in command, where


@pytest.mark.parametrize(("where", "command", "shown"), RUNNABLE, ids=[e[0] for e in RUNNABLE])
def test_every_example_parses_and_names_real_environments(where: str, command: str, shown: list[str]) -> None:
    argv = argv_of(command)
    assert argv is not None
    words = [w for w in argv if not w.startswith("-")]
    name = words[0]
    assert name in COMMANDS, f"{where}: `accelenv {name}` is no command"
    parser = build_parser(name)
    trailing = argv[argv.index("--") + 1 :] if "--" in argv else []
    args, extra = parser.parse_known_args(argv[: len(argv) - len(trailing) - (1 if trailing else 0)])
    assert all("=" in e for e in extra), f"{where}: unknown arguments {extra}"
    matrix = load_matrix(REPO / "matrix.toml")
    sessions = {f.session for f in matrix.families.values()}
    known_envs = set(matrix.envs) | sessions | ADDED
    for attribute in ("env", "envs"):
        value = getattr(args, attribute, None)
        for env in [value] if isinstance(value, str) else value or []:
            if name in ("add",):
                continue
            assert env in known_envs, f"{where}: environment {env!r} is not in matrix.toml"
    template = getattr(args, "template", None)
    if template is not None:
        section = {"sku": matrix.skus, "runtime": matrix.runtimes, "env": matrix.envs}[args.kind]
        assert template in section or template in ADDED, f"{where}: --from {template} names no entry"
    if name == "add" and "--dry-run" in argv and args.kind == "sku":
        assert args.id not in matrix.skus, f"{where}: the example adds {args.id}, which the matrix already has"


def test_the_validate_example_prints_what_the_readme_shows() -> None:
    [(where, _, shown)] = [e for e in EXAMPLES if e[1].split("#")[0].strip() == "accelenv validate"]
    out = io.StringIO()
    assert main(["--matrix", str(REPO / "matrix.toml"), "validate"], out=out) == 0
    printed = next(line for line in out.getvalue().splitlines() if ": valid: " in line)
    expected = next(line for line in shown if ": valid:" in line)
    stable = re.compile(r"valid: .*")
    # the SKU count is left out: a vendor adding a SKU (docs/adding-an-accelerator.md) must not have to edit it
    any_skus = re.compile(r"\b\d+ SKUs\b")
    printed_part, expected_part = stable.search(printed), stable.search(expected)
    assert printed_part is not None
    assert expected_part is not None
    figures = any_skus.sub("N SKUs", expected_part.group(0))
    assert any_skus.sub("N SKUs", printed_part.group(0)) == figures, f"update {where}"


def test_the_contents_link_to_the_readmes_sections() -> None:
    """Every `(#anchor)` of the README is one of its headings, slugged as GitHub does; every docs/ page the README
    names as a path exists or is one of the pages named as coming (listed here, so a typo still fails)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    headings = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("## ")]
    slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
    anchors = re.findall(r"\]\(#([^)]+)\)", text)
    assert anchors
    assert [a for a in anchors if a not in slugs] == []
    coming = {"ci.md", "results.md", "transports.md", "cluster.md", "kubernetes.md", "contributing-hardware.md"}
    named = set(re.findall(r"docs/([a-z-]+\.md)", text))
    assert [n for n in sorted(named) if not (REPO / "docs" / n).is_file() and n not in coming] == []
