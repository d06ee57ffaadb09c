"""Secrets never leave the machine: what accelenv saves or prints passes through here first.

Tools echo their environment, credentialed URLs and tokens into their output, and a snapshot keeps that output
verbatim. `redact_text` replaces, by pattern (this list is the documented set of shapes; tests/hostile generate
a corpus from it):
- the password of a `scheme://user:password@host` URL, however long;
- a token used as a URL's user name (`https://ghp_...@host`, `https://Xy7kQ2pL9@host`): any user name but a plain
  lower-case word (`git`, `oauth2`, `__token__`);
- the value of an assignment (`NAME=value`, `NAME: value`, `"NAME": "value"`, also inside a line such as
  `WARNING: NAME=value`) whose name says it holds a secret (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH,
  `*_PWD` such as MYSQL_PWD ...), a quoted value (`NAME="with spaces"`) whole;
- docker config `"auth": "..."` values;
- netrc passwords (`machine h login u password p`, and a `password p` line);
- tokens of well-known shapes (GitHub, Hugging Face, AWS access key ids, Slack, GitLab, PyPI, npm, Google,
  OpenAI-style `sk-`, JWTs, `Bearer ...`, PEM private keys),
with `<redacted>`. `redact_json` does it to every string of a JSON document, and to the whole value of a key
whose name says it holds a secret. The replacements keep JSON text valid: no pattern swallows a quote or a
backslash.

`terminal_safe` makes text safe to print: control characters (ANSI escape sequences, carriage returns, C1
codes) and bidirectional overrides are shown as escapes (`\\x1b`) instead of acting on the terminal.
"""

from __future__ import annotations

import functools
import re

from accelenv.lazyre import lazy

REDACTED = "<redacted>"


_NAME_WORDS = r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH|AUTHORIZATION|COOKIE|[A-Z0-9]_PWD)"
_NAME_ENDINGS = (
    r"(?i:token|secret|passw(?:or)?d|passphrase|credentials?|authorization|cookie|_pwd"
    r"|(?:api|access|private|secret|signing|auth|ssh)[_-]?key|auth[_-]?token)s?"
)
# A name that says it holds a secret: the word as a part of an UPPER_SNAKE name (HF_TOKEN, AWS_SECRET_ACCESS_KEY;
# MONKEY is a false alarm worth having), or another name ending in such a word (password, api_key, apiToken).
# A bare "key" or "auth" is prose ("not a valid key: expected ...", "KEY=VALUE"), not a secret's name.
SECRET_NAME = lazy(rf"\A(?!(?:KEY|AUTH)\Z)(?:[A-Z0-9_.-]*{_NAME_WORDS}[A-Z0-9_.-]*|[A-Za-z0-9_.-]*{_NAME_ENDINGS})\Z")
# Every pattern below is linear in the text: names and URL parts are bounded, and a name starts only where a run
# of name characters starts (a hostile tool's megabytes of output must not make redaction slow).
_ASSIGNMENT = lazy(
    r"(?P<name>(?<![A-Za-z0-9_./-])[A-Za-z_][A-Za-z0-9_.-]{0,120})"  # after a /, a path: /etc/passwd: ...
    r"(?P<sep>[\"']?[ \t]*[=:][ \t]*(?P<quote>[\"']?)(?:(?:Bearer|Basic|Digest|Token)[ \t]+)?)"
    r"(?=(?!<redacted>)[^\s\"'\\])"  # the value is measured only for a secret's name: no rescanning
)
_VALUE_RUN = re.compile(r"[^\s\"'\\]+")
_QUOTED_MAX = 4096
# The parts of a URL exclude `/`, so a scan from one `scheme://` stops at the next: linear however long.
_URL_PASSWORD = lazy(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/@:\"'\\]{0,256}:)(?!<redacted>@)[^\s/@\"'\\]+(?P<at>@)"
)
_URL_USER = lazy(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]{0,30}://)(?P<user>[^\s/@:\"'\\]+)(?P<at>@)")
# A plain user name is a lower-case word, perhaps with a number of one or two digits (git, oauth2, __token__,
# x-access-token, deploy); anything else a URL carries as its user (mixed case, digits within: a token of any
# length, `https://Xy7kQ2pL9@host/`) is taken for a secret.
_PLAIN_USER = lazy(r"\A[a-z_][a-z_.-]{0,30}[0-9]{0,2}\Z")
_NETRC = lazy(
    r"(?P<head>(?:\b(?:machine|default)\b[^\n]{0,1000}?|^[ \t]*)\bpassword[ \t]+)(?!<redacted>)[^\s\"'\\]+",
    re.MULTILINE,
)
_DOCKER_AUTH = lazy(r"(?P<head>\"auth\"[ \t]*:[ \t]*\")(?!<redacted>)[^\"\\]+(?=\")", re.IGNORECASE)
_SCHEMES = frozenset({"bearer", "basic", "digest", "token"})
_BEARER = lazy(r"(?P<head>\bBearer[ \t]+)(?!<redacted>)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
# Each shape with the literal text every match of it contains: text with none of them is not searched.
_SHAPES = (
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    (("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face
    (("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"), r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"),  # AWS
    (("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"), r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack
    (("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,}"),  # GitLab
    (("pypi-",), r"\bpypi-[A-Za-z0-9_-]{50,}"),  # PyPI
    (("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),  # npm
    (("AIza",), r"\bAIza[0-9A-Za-z_-]{35}\b"),  # Google API keys
    (("ya29.",), r"\bya29\.[0-9A-Za-z_-]{20,}"),  # Google OAuth access tokens
    (("sk-",), r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),  # OpenAI / Anthropic style keys
    (("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JWTs
    (("-----BEGIN",), r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----[^-]*-----END[A-Z ]{0,40}PRIVATE KEY-----"),
)
_TOKEN_MARKERS = tuple(marker for markers, _ in _SHAPES for marker in markers)
_ANY_MARKER = lazy("|".join(re.escape(marker) for marker in _TOKEN_MARKERS))  # one scan instead of one a marker
_TOKEN_SHAPES = lazy("|".join(pattern for _, pattern in _SHAPES))
_CONTROL = lazy(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def redact_text(text: str) -> str:
    """`text` with every secret the patterns recognise replaced by `<redacted>`."""
    if not text:
        return text
    # Each pattern runs only on text holding what its every match holds (patterns compile on first use).
    if _ANY_MARKER.search(text):
        text = _TOKEN_SHAPES.sub(REDACTED, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED + m["at"], text)
        text = _URL_USER.sub(_url_user, text)
    if "password" in text:
        text = _NETRC.sub(lambda m: m["head"] + REDACTED, text)
    if '"auth"' in text.lower():
        text = _DOCKER_AUTH.sub(lambda m: m["head"] + REDACTED, text)
    if "=" in text or ":" in text:
        text = _assignments(text)
    if "bearer" in text.lower():
        text = _BEARER.sub(lambda m: m["head"] + REDACTED, text)
    return text


def _url_user(match: re.Match[str]) -> str:
    user = match["user"]
    if user == REDACTED or (_PLAIN_USER.match(user) and not _TOKEN_PREFIX.match(user)):
        return match[0]
    return match["head"] + REDACTED + match["at"]


_TOKEN_PREFIX = lazy(r"\A(?:gh[pousr]_|github_pat_|hf_|glpat-|pypi-|npm_|sk-|xox[abprs]-|ya29\.|AKIA|eyJ)")


def _assignments(text: str) -> str:
    """Every secret assignment redacted. A name that is not a secret's gives back its value to be looked at
    again (`WARNING: TOKEN=x`: WARNING is not a secret's name, TOKEN is); each step moves forward, and a value
    is measured only once, when it is redacted, so the scan stays linear."""
    parts: list[str] = []
    pos = 0
    while match := _ASSIGNMENT.search(text, pos):
        start = match.end()
        end = _value_end(text, start, match["quote"]) if SECRET_NAME.match(match["name"]) else start
        if end == start or text[start:end].lower() in _SCHEMES:
            parts.append(text[pos:start])  # `Authorization: Bearer <redacted>` is done already
        else:
            parts.append(text[pos:start] + REDACTED)
            start = end
        pos = start
    parts.append(text[pos:])
    return "".join(parts)


def _value_end(text: str, start: int, quote: str) -> int:
    """Where the value at `start` ends: at its closing quote (a quoted value may hold spaces), else at the first
    space, quote or backslash."""
    if quote:
        close = text.find(quote, start, start + _QUOTED_MAX)
        if close != -1 and "\n" not in text[start:close] and "\\" not in text[start:close]:
            return close
    run = _VALUE_RUN.match(text, start)
    return run.end() if run else start


def redact_json(data: object) -> object:
    """A copy of a JSON document with every string redacted, keys included, and the value of every key whose
    name says it holds a secret replaced whole. Serialised, it needs no further redaction (`dump_json`)."""
    if isinstance(data, str):
        return redact_text(data)
    if isinstance(data, dict):
        return {_key(str(key)): _redact_entry(str(key), value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [redact_json(item) for item in data]
    return data


@functools.lru_cache(maxsize=4096)
def _key(key: str) -> str:
    """A key redacted (a token can be a key: an environment's variables, a URL as a name); keys repeat, so once."""
    return redact_text(key)


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    """Whether `key` names a secret; keys repeat across a document's thousands of objects, so each is asked once."""
    return bool(SECRET_NAME.match(key)) or key.lower() == "auth"  # docker config: {"auths": {host: {"auth": ...}}}


def _redact_entry(key: str, value: object) -> object:
    if _secret_key(key) and isinstance(value, str | int | float) and not isinstance(value, bool):
        return REDACTED
    return redact_json(value)


def terminal_safe(text: str) -> str:
    """`text` with control characters (other than newline and tab) shown as escapes, not sent to the terminal."""
    if text.isascii() and text.replace("\n", "").replace("\t", "").isprintable():
        return text  # ASCII with nothing below a space but newlines and tabs, and no DEL: nothing to escape
    escaped: str = _CONTROL.sub(_escape, text)
    return escaped


def one_line(text: str) -> str:
    """`terminal_safe(text)` with its line breaks and tabs shown as escapes too: a name from outside (a file name,
    a header) that is printed inside a line can neither start a line of its own nor forge one."""
    return terminal_safe(text).replace("\n", "\\n").replace("\t", "\\t")


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
