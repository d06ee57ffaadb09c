"""Issue 41, output that can be forged and secrets that slip through: every pattern accelenv anchors must match a
whole string (a schema's `$` lets a trailing newline through under Python's `re.search`, so every schema is
checked by `strict_validator`, and a pattern in code ends in `\\Z`, not `$`); a short token as a URL's user is
redacted; node labels are redacted as raw values, before encoding; a name from outside cannot add a line (or an
NFD directive) to a feature file or to `results`' summary."""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordkit import SHIPPED_MATRIX, good_record

import accelenv as package
from accelenv.check.labels import FORMATS, PREFIX, labelled, render, value_problem
from accelenv.matrix import load_matrix
from accelenv.redact import REDACTED, one_line, redact_text
from accelenv.results.record import check_record

PACKAGE = Path(package.__file__).parent
# Modules whose patterns are JSON Schema (ECMA-262) patterns, where `\Z` does not exist: what holds them is that
# every schema is validated through strict_validator (below).
SCHEMA_MODULES = {"matrix/schema.py", "schema_values.py", "matrix/schema_hardware.py", "results/schema.py"}
_RE_CALLS = {"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer", "lazy"}


def _pattern_text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}" for v in node.values
        )
    return None


def _ends_unanchored(pattern: str) -> bool:
    """The pattern ends in `$` (not `\\$`): under re.match/search it matches before a final newline too."""
    return pattern.endswith("$") and not pattern.endswith("\\$")


def _line_mode(call: ast.Call) -> bool:
    return any(name in ast.unparse(call) for name in ("MULTILINE", "re.M)", "re.M |", "| re.M"))


def test_no_pattern_in_code_ends_in_a_dollar_that_lets_a_newline_through() -> None:
    """Enumerates every regular expression the package compiles or applies (`re.*`, `lazy`), and every module
    constant that holds one: none may end in `$` unless it reads lines (re.MULTILINE)."""
    offenders = []
    for source in sorted(PACKAGE.rglob("*.py")):
        rel = source.relative_to(PACKAGE).as_posix()
        if rel in SCHEMA_MODULES:
            continue
        tree = ast.parse(source.read_text(encoding="utf-8"))
        line_mode = {id(a) for n in ast.walk(tree) if isinstance(n, ast.Call) and _line_mode(n) for a in n.args}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if name not in _RE_CALLS or not node.args:
                    continue
                text = _pattern_text(node.args[0])
                if text is not None and _ends_unanchored(text) and id(node.args[0]) not in line_mode:
                    offenders.append(f"{rel}:{node.lineno}: {text[-40:]!r}")
    assert offenders == [], "end these patterns in \\Z (or use fullmatch):\n" + "\n".join(offenders)


def test_the_enumeration_sees_a_dollar_pattern() -> None:
    """The scan above is not blind: it finds `$` at the end of a compiled pattern and lets a line-mode one be."""
    tree = ast.parse('import re\nA = re.compile(r"^[a-z]+$")\nB = re.compile(r"^x$", re.MULTILINE)\n')
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert [_ends_unanchored(_pattern_text(c.args[0]) or "") and not _line_mode(c) for c in calls] == [True, False]


def test_every_json_schema_is_validated_through_the_strict_validator() -> None:
    """Enumerates every use of jsonschema's validators in the package: only matrix/schema_check.py makes one,
    and its `pattern` matches whole strings."""
    offenders = []
    for source in sorted(PACKAGE.rglob("*.py")):
        rel = source.relative_to(PACKAGE).as_posix()
        if rel == "matrix/schema_check.py":
            continue
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Attribute):  # jsonschema.validate, jsonschema.Draft202012Validator
                names = [node.attr] if "jsonschema" in ast.unparse(node.value) else []
            elif isinstance(node, ast.Name):
                names = [node.id] if node.id.endswith("Validator") else []
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jsonschema"):
                names = [alias.name for alias in node.names]
            for name in names:
                if name.endswith("Validator") or name in {"validate", "validator_for", "validators"}:
                    offenders.append(f"{rel}:{getattr(node, 'lineno', '?')}: {name}")
    assert offenders == [], "validate through accelenv.matrix.schema_check.strict_validator:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", "gpu-nvidia-cu132-20261110T100000Z-0000000a\n"),
        ("started", "2026-11-10T10:00:00Z\n"),
        ("env", {"id": "gpu-nvidia-cu132\n", "lock_sha256": None, "image": None, "frameworks": []}),
        ("host", {"family": "nvidia", "sku": "h200", "device_count": 1, "driver": "595.80\n", "nodes": 1}),
    ],
)
def test_a_trailing_newline_does_not_pass_the_record_schema(field: str, value: object) -> None:
    data = good_record("0000000a")
    assert check_record(data, load_matrix(SHIPPED_MATRIX), now=2e9) is None
    data[field] = value
    problem = check_record(data, load_matrix(SHIPPED_MATRIX), now=2e9)
    assert problem is not None
    assert "does not match" in problem


# ---------------------------------------------------------------------------------------------------- URL users

SHORT_TOKEN = st.text(alphabet=string.ascii_letters + string.digits, min_size=8, max_size=16).filter(
    lambda s: any(c.isdigit() for c in s[:-2]) or any(c.isupper() for c in s)
)


@settings(max_examples=300, deadline=None)
@given(SHORT_TOKEN, st.sampled_from(["github.com", "pypi.example:8443", "10.0.0.1"]))
def test_a_short_token_as_a_urls_user_is_redacted(token: str, host: str) -> None:
    for text in (f"https://{token}@{host}/org/repo.git", f"index-url = https://{token}@{host}/simple"):
        cleaned = redact_text(text)
        assert token not in cleaned, (text, cleaned)
        assert REDACTED in cleaned


@pytest.mark.parametrize("user", ["git", "oauth2", "__token__", "deploy", "x-access-token", "ci1"])
def test_a_plain_user_name_stays(user: str) -> None:
    assert redact_text(f"https://{user}@github.com/x") == f"https://{user}@github.com/x"


def test_outdated_and_snapshots_redact_through_redact_text() -> None:
    """The two outputs the short-token case was seen in print and save through the one redactor."""
    for module in ("cli/upstream.py", "host/snapshot.py", "cli/output.py"):
        text = (PACKAGE / module).read_text(encoding="utf-8")
        assert "redact_text" in text or "redact_json" in text, module


# ---------------------------------------------------------------------------------------------------- node labels

RAW_SECRETS = [  # (the raw value, the secret in it)
    ("token=" + "a" * 24, "a" * 24),
    ("https://ci:" + "p" * 20 + "@registry.example/x", "p" * 20),
    ("ghp_" + "Z" * 36, "Z" * 36),
    ("Bearer " + "b" * 30, "b" * 30),
    ("sk-prod-us-central2-b-slice-0001", None),  # a secret's shape; harmless or not, it leaves as a valid label
]


@pytest.mark.parametrize(("raw", "secret"), RAW_SECRETS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_label_values_are_redacted_before_encoding_and_stay_valid(raw: str, secret: str | None, fmt: str) -> None:
    found = labelled({PREFIX + "tpu-slice": raw, PREFIX + "family": "tpu"})
    assert all(value_problem(value) is None for value in found.labels.values()), found.labels
    text = render(found, fmt, header="node labels")
    if secret is not None:
        assert secret not in text, text
    assert redact_text(text) == text, "the output still held something to redact"


@pytest.mark.parametrize(
    "name",
    [
        "node7.json\n+expiry-time=2030-01-01T00:00:00Z",
        "node7\r+expiry-time=2030",
        "node7\u2028+expiry-time=2030",
        "node7\x0b+expiry-time=2030",
        "+expiry-time=2030",
    ],
)
@pytest.mark.parametrize("fmt", ["nfd", "ray"])
def test_a_snapshot_name_cannot_add_a_line_or_an_nfd_directive(name: str, fmt: str) -> None:
    found = labelled({PREFIX + "family": "cpu"})
    text = render(found, fmt, header=f"snapshot {name}" if not name.startswith("+") else name)
    lines = text.splitlines()
    assert lines[0].startswith("# ")
    assert not any(line.startswith("# +") for line in lines), text
    assert [line for line in lines if line.startswith("#")] == [lines[0]], text
    assert len(lines) == 1 + len(found.labels)


def test_one_line_escapes_every_line_break() -> None:
    breaks = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
    assert len(("a" + one_line(breaks) + "b").splitlines()) == 1
