"""Issue 28, secrets: `redact_text` against a generated corpus of every documented shape (host/redact.py's
docstring), embedded in the lines tools really print, and every output path of accelenv fed through it.

The secret values are drawn so that no shape-specific prefix helps: a value is found by where it stands."""

from __future__ import annotations

import ast
import json
import string
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import accelenv as package
from accelenv.host.redact import REDACTED, redact_json, redact_text

PACKAGE = Path(package.__file__).parent

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
    text = json.dumps(redact_json(document))
    json.loads(text)
    for _, secret in cases:
        assert secret not in text


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
