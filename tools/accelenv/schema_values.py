"""What a value of `matrix.toml` may be: the patterns that guard its strings, and the helpers that build each
property of the schema (`schema.py`) from a description, a pattern and the words that explain the pattern.

Every pattern refuses whitespace, quotes and shell metacharacters, so no value that ends up in a Dockerfile or a
shell can carry them; `x-hint` says in words what a pattern accepts, and validation messages use it instead of
the raw regular expression (`schema_check.py`).
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

# The limits of an environment id, defined here once: every `accelenv.io/env.<ID>` label key must hold it, and a
# label name (Ray's and Kubernetes') is at most 63 characters, of which `env.` takes four.
LABEL_NAME_MAX = 63
ENV_LABEL = "env."
ENV_ID_MAX = LABEL_NAME_MAX - len(ENV_LABEL)


def id_pattern(longest: int) -> str:
    """A lower-case id of letters, digits and inner dashes, at most `longest` characters."""
    return rf"^[a-z0-9](?:[a-z0-9-]{{0,{longest - 2}}}[a-z0-9])?$"


# Patterns shared by several properties.
ID = id_pattern(64)
ENV_ID = id_pattern(ENV_ID_MAX)
VERSION = r"^[0-9][0-9A-Za-z]*(?:[.+_-][0-9A-Za-z]+)*$"
PCI_ID = r"^0x[0-9a-f]{4}$"
RAY_ACCELERATOR_TYPE = r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$"  # a Ray/Kubernetes label value
ENV_VAR = r"^[A-Z][A-Z0-9_]*$"
COLLECTIVE_BACKEND = r"^[a-z][a-z0-9_]{0,31}$"  # a torch.distributed backend name
RAY_RESOURCE = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"  # a Ray resource name (GPU, neuron_cores)
TOOL = r"^[a-z0-9][a-z0-9_.-]*$"
DEVICE_NODE = r"^/dev/[A-Za-z0-9_*?/\[\]-]+$"
PRODUCT_NAME = r"^[A-Za-z0-9*?](?:[A-Za-z0-9 ._()/+*?-]*[A-Za-z0-9*?)])?$"
# No pattern admits a line break: besides the control characters (C0, DEL, C1), the Unicode line and paragraph
# separators and the bidirectional overrides (text that reads differently than it runs) are refused. Only
# TEXT_BLOCK (notes for readers, which end up in no Dockerfile or shell) allows a newline.
_NOT_TEXT = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
TEXT_LINE = rf"^[^{_NOT_TEXT}]+$"
TEXT_BLOCK = r"^[^\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]*$"
OS_LABEL = r"^[a-z]+[0-9][0-9.]*$"
PYTHON = r"^3\.[0-9]{1,2}$"
URL = (
    r"^(?:https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?|http://(?:localhost|127\.0\.0\.1|\[::1\])(?::[0-9]{1,5})?)"
    r"(?:/[A-Za-z0-9._~%/+=-]*)?$"
)
IMAGE_REPOSITORY = r"^(?:[a-z0-9.-]+(?::[0-9]{1,5})?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
IMAGE_TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
DIGEST = r"^sha256:[a-f0-9]{64}$"
SHM_SIZE = r"^[1-9][0-9]{0,5}[kmg]$"
REQUIREMENT = (
    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*\])?"
    r"(?:(?:===?|~=|!=|>=|<=|>|<)[A-Za-z0-9.*+!_-]+(?:,(?:===?|~=|!=|>=|<=|>|<)[A-Za-z0-9.*+!_-]+)*)?$"
)
TEST_PATH = r"^(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_./:-]*$"
REGEX_TEXT = rf"^[^{_NOT_TEXT}]{{1,200}}$"
ARCH = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
WHEEL_TAG = r"^[a-z][a-z0-9.]*$"
WHEEL_TAG_FORMAT = r"^[a-z0-9.]*(?:\{(?:major|minor|patch)\}[a-z0-9.]*)+$"


def text(description: str, pattern: str, hint: str, **extra: Any) -> Json:
    """A string property matching `pattern`; `hint` says in words what matches."""
    return {"type": "string", "description": description, "pattern": pattern, "x-hint": hint, **extra}


def line(description: str) -> Json:
    return text(description, TEXT_LINE, "one line of text")


def block(description: str) -> Json:
    """Text for readers, newlines allowed: it ends up in no Dockerfile and no shell."""
    return text(description, TEXT_BLOCK, "text without control characters")


def url(description: str) -> Json:
    return text(description, URL, "an https:// URL")


def python(description: str) -> Json:
    return text(description, PYTHON, "a version such as 3.12")


def item(pattern: str, hint: str) -> Json:
    """A list's item: a string matching `pattern`."""
    return {"type": "string", "pattern": pattern, "x-hint": hint}


def flag(description: str) -> Json:
    return {"type": "boolean", "description": description}


def choice(description: str, options: list[str]) -> Json:
    return {"type": "string", "enum": options, "description": description}


def array(description: str, items: Json, *, min_items: int = 0) -> Json:
    out: Json = {"type": "array", "description": description, "items": items, "uniqueItems": True}
    if min_items:
        out["minItems"] = min_items
    return out


def entry(description: str, properties: dict[str, Json], required: tuple[str, ...] = ()) -> Json:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "properties": properties,
        "required": list(required),
    }


def table_of(
    description: str, entry_ref: str, *, key: str = ID, hint: str = "a lower-case id: letters, digits and dashes"
) -> Json:
    return {
        "type": "object",
        "description": description,
        "propertyNames": {"pattern": key, "x-hint": hint},
        "additionalProperties": {"$ref": entry_ref},
    }


def ids(description: str) -> Json:
    return array(description, item(ID, "an id: lower-case letters, digits, dashes"))


def sources() -> Json:
    return ids("Ids of entries under [sources] that back the facts of this entry.")


# A GitHub user (@handle: letters, digits, single hyphens, at most 39) or team (@org/team-slug), as CODEOWNERS takes
OWNER = r"^@[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}(?:/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?$"


def owners(description: str) -> Json:
    return array(description, text("A GitHub user or team.", OWNER, "@handle or @org/team"), min_items=1)
