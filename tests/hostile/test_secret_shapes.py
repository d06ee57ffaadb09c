"""Issue 28, secrets: `redact_text` against a generated corpus of every documented shape (redact.py's
docstring), embedded in the lines tools really print, and every output path of accelenv fed through it.

The secret values are drawn so that no shape-specific prefix helps: a value is found by where it stands."""

from __future__ import annotations

import ast
import importlib
import json
import string
from pathlib import Path
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

import accelenv as package
from accelenv import redact as redact_module
from accelenv.redact import REDACTED, redact_json, redact_text, terminal_safe

PACKAGE = Path(package.__file__).parent
RE_PARSER: Any = importlib.import_module("re._parser")  # a pattern's structure, for each shape's literal starts

# A secret: 8 to 400 characters, the kind a password or token holds (no space, quote, backslash or @ / :).
SECRET = st.text(alphabet=string.ascii_letters + string.digits + "-_.~+=!$%&*", min_size=8, max_size=400).filter(
    lambda s: s.strip(".-_") == s and REDACTED not in s
)
LONG = st.text(alphabet=string.ascii_letters + string.digits, min_size=257, max_size=2000)
SECRET_NAMES = st.sampled_from(
    [
        "HF_TOKEN",
        "GITHUB_TOKEN",
        "MYSQL_PWD",
        "DB_PWD",
        "PGPASSWORD",
        "MY_SERVICE_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "api_key",
        "client_secret",
        "NPM_TOKEN",
        "REGISTRY_PASSWORD",
    ]
)
PREFIXES = st.sampled_from(["", "WARNING: ", "warning: ", "+ export ", "env: ", "  ", "[pid 12] "])
HOSTS = st.sampled_from(["pypi.internal", "10.0.0.7:6379", "registry.example.com", "127.0.0.1:5000"])


@st.composite
def lines(draw: st.DrawFn) -> tuple[str, str]:
    """(a line a tool might print, the secret in it)."""
    secret = draw(SECRET)
    name = draw(SECRET_NAMES)
    host = draw(HOSTS)
    shape = draw(st.integers(0, 9))
    words = " ".join(draw(st.lists(SECRET, min_size=2, max_size=4)))
    text, leak = {
        0: (f"https://user:{secret}@{host}/simple", secret),
        1: (f"https://user:{draw(LONG)}@{host}/simple", None),
        2: (f"https://ghp_{secret}@{host}/org/repo.git", secret),
        3: (f"{name}={secret}", secret),
        4: (f"machine {host} login someone password {secret}", secret),
        5: (f"password {secret}", secret),
        6: (json.dumps({"auths": {host: {"auth": secret}}}), secret),
        7: (f'{name}="{words}"', words),
        8: (f"{name}: '{words}'", words),
        9: (f'"{name}": "{secret}"', secret),
    }[shape]
    if leak is None:  # the long password
        leak = text.split(":", 2)[2].split("@")[0]
    # a secret that is also a word of its line ("password password", "PASSWORD" in PGPASSWORD) stays in the line
    # as that word whatever is redacted: such a draw proves nothing
    assume(text.count(leak) == 1 and all(text.count(part) == 1 for part in leak.split(" ") if len(part) >= 8))
    prefix = draw(st.sampled_from(["", "  ", "\t"]) if shape == 5 else PREFIXES)  # netrc: a line of its own
    return prefix + text, leak


@settings(max_examples=400, deadline=None)
@given(lines())
def test_every_shape_is_redacted(case: tuple[str, str]) -> None:
    line, secret = case
    cleaned = redact_text(line)
    assert secret not in cleaned, (line, cleaned)
    assert REDACTED in cleaned
    for part in secret.split(" "):
        if len(part) >= 8:  # no piece of a quoted value stays
            assert part not in cleaned


@settings(max_examples=200, deadline=None)
@given(st.lists(lines(), min_size=1, max_size=5))
def test_json_documents_stay_json_and_hold_no_secret(cases: list[tuple[str, str]]) -> None:
    document = {"stdout": "\n".join(line for line, _ in cases), "environment": {"X": cases[0][0]}}
    # a secret that is also a word of the document's keys ("environm") or of another line ("password") stays
    # there as that word whatever is redacted: such a draw proves nothing
    keys = json.dumps({"stdout": "", "environment": {"X": ""}})
    assume(
        not any(
            secret in keys or any(secret in other for j, (other, _) in enumerate(cases) if j != i)
            for i, (_, secret) in enumerate(cases)
        )
    )
    text = json.dumps(redact_json(document))
    json.loads(text)
    for _, secret in cases:
        assert secret not in text


@settings(max_examples=200, deadline=None)
@given(st.lists(lines(), min_size=1, max_size=5))
def test_printed_json_is_redacted_once_keys_included_and_holds_no_secret(cases: list[tuple[str, str]]) -> None:
    """`dump_json` to a command's stream redacts each value (and key) before serialising, and the stream does not
    redact the text again: what it prints is JSON and holds no secret, wherever the secret stood."""
    import io

    from accelenv.cli.output import dump_json, safe_text

    document = {
        "stdout": "\n".join(line for line, _ in cases),
        "environment": {"X": cases[0][0], cases[-1][0]: 1},  # a secret as a key
        "rows": [[line, {"note": line}] for line, _ in cases],
    }
    target = io.StringIO()
    stream = safe_text(target, "standard output")
    stream.write("a line before it, with ")
    stream.write("TOKEN=s3cr3t-v4lue\n")  # what is pending is still redacted as text
    dump_json(document, stream)
    stream.flush()
    head, _, body = target.getvalue().partition("\n")
    assert head == f"a line before it, with TOKEN={REDACTED}"
    json.loads(body)
    for _, secret in cases:
        assert secret not in body


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["git", "oauth2", "__token__", "deploy", "x-access"]), HOSTS)
def test_plain_user_names_and_prose_stay(user: str, host: str) -> None:
    for text in (f"https://{user}@{host}/x", "the password is checked by pip", "PWD=/home/user", "KEY=VALUE"):
        assert redact_text(text) == text


# ---------------------------------------------------------------------------------------------------- output paths

# Every place a command writes what it produced to a file or a stream, and how it is redacted there.
OUTPUT_WRITERS = {
    "cli/output.py": "redact_text",  # SafeText: every print to stdout/stderr, every format of every command
    "host/snapshot.py": "redact_json",  # snapshot -o
    "cli/host.py": "redact_json",  # inspect --jsonl
    "cli/upstream.py": "redact_text",  # refresh -o FILE: the pull-request body
    "cli/labels.py": "redact_text",  # labels -o FILE: node labels, partly from tool output
}


def test_every_output_path_redacts() -> None:
    """Each module that writes a command's output calls the redaction function next to its write."""
    for rel, function in OUTPUT_WRITERS.items():
        tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
        called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert function in called, f"{rel} writes output without {function}"


def test_the_output_writers_are_all_listed() -> None:
    """A module of the command line that writes a user-named file (write_atomic of an args value) is listed."""
    unlisted = []
    for source in sorted((PACKAGE / "cli").glob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Name) and call.func.id == "write_atomic" and "args." in ast.unparse(call):
                rel = source.relative_to(PACKAGE).as_posix()
                if rel not in OUTPUT_WRITERS:
                    unlisted.append(f"{rel}:{call.lineno}")
    assert unlisted == []


def _every_pattern(text: str) -> str:
    """`redact_text` without its gates: every pattern run on every text, in its order."""
    r = redact_module
    text = r._TOKEN_SHAPES.sub(REDACTED, text)
    text = r._URL_PASSWORD.sub(lambda m: m["head"] + REDACTED + m["at"], text)
    text = r._URL_USER.sub(r._url_user, text)
    text = r._NETRC.sub(lambda m: m["head"] + REDACTED, text)
    text = r._DOCKER_AUTH.sub(lambda m: m["head"] + REDACTED, text)
    text = r._assignments(text)
    return str(r._BEARER.sub(lambda m: m["head"] + REDACTED, text))


PIECES = st.sampled_from(
    [
        *redact_module._TOKEN_MARKERS,
        "://",
        "https://",
        "user:",
        "@host/",
        "password ",
        "machine h login u ",
        '"auth": "',
        '"AUTH":"',
        "Bearer ",
        "BEARER\t",
        "=",
        ": ",
        '"',
        "'",
        " ",
        "\n",
        "TOKEN",
        "HF_TOKEN=",
        "api_key",
        "ABCDEFGHIJKLMNOP",
        "0123456789abcdef0123456789",
        ".",
    ]
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(min_size=1, max_size=12)), min_size=1, max_size=30))
def test_the_gates_never_let_through_what_a_pattern_would_catch(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert redact_text(text) == _every_pattern(text)


def _literal_starts(items: list[tuple[Any, Any]]) -> tuple[set[str], bool]:
    """Every literal text a parsed pattern's matches start with, up to its first element that is not a literal, a
    set of literals, or a group or choice of such (word boundaries are skipped); and whether that was all of it."""
    starts = {""}
    for op, arg in items:
        name = str(op)
        if name == "AT":
            continue
        if name == "LITERAL":
            choices, whole = {chr(arg)}, True
        elif name == "IN" and all(str(o) == "LITERAL" for o, _ in arg):
            choices, whole = {chr(a) for _, a in arg}, True
        elif name in ("BRANCH", "SUBPATTERN"):
            parts = [_literal_starts(list(b)) for b in arg[1]] if name == "BRANCH" else [_literal_starts(list(arg[-1]))]
            choices, whole = set().union(*(p for p, _ in parts)), all(w for _, w in parts)
        else:
            return starts, False
        starts = {s + c for s in starts for c in choices}
        if not whole:
            return starts, False
    return starts, True


def test_every_token_shape_is_gated_by_exactly_its_literal_starts() -> None:
    """A shape's markers are the literal starts of its pattern, all of them: text holding none is not searched, so a
    start missing from the markers would be a secret let through."""
    for markers, pattern in redact_module._SHAPES:
        starts, _ = _literal_starts(list(RE_PARSER.parse(pattern)))
        assert starts == set(markers), (pattern, starts, markers)
        assert all(len(start) >= 3 for start in starts)  # a marker of a letter or two would gate nothing


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x2070), max_size=60) | st.text(string.printable, max_size=60))
def test_terminal_safe_escapes_what_its_pattern_escapes(text: str) -> None:
    """The shortcut for plain ASCII lets nothing through that the control-character pattern would escape."""
    assert terminal_safe(text) == redact_module._CONTROL.sub(redact_module._escape, text)
    for code in (*range(0x20), 0x7F, 0x85, 0x9B, 0x202E):
        if chr(code) not in "\n\t":
            assert chr(code) not in terminal_safe(text + chr(code))
