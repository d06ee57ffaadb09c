"""A document checked against a JSON Schema, and every violation said in words: the key path, and what was expected
(the schema's `x-hint`, "did you mean" for an unknown key or value), never the raw regular expression.

Patterns must match whole strings, as ECMA-262 (the schemas' own regex dialect) anchors them: every schema
accelenv validates with goes through `strict_validator`. jsonschema is the slowest import of the matrix core, so
only validation imports this module.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

import jsonschema

from accelenv.matrix.problems import suggest
from accelenv.matrix.schema import matrix_schema

if TYPE_CHECKING:
    from collections.abc import Iterator

Json = dict[str, Any]


@cache
def _validator() -> jsonschema.protocols.Validator:
    # The schema itself is checked against the 2020-12 metaschema by the tests, not on every run (it costs more
    # than validating the matrix).
    return strict_validator(matrix_schema())


def strict_validator(schema: Json) -> jsonschema.protocols.Validator:
    """A validator for `schema` whose `pattern` must match the whole string, as ECMA-262 (the schema's own
    regex dialect) anchors it. jsonschema runs `re.search`, where `$` also matches before a final newline:
    `^[a-z]+$` would accept "cpu-evil\n". Every schema accelenv validates with goes through here."""
    validator: jsonschema.protocols.Validator = _strict_class(jsonschema.validators.validator_for(schema))(schema)
    return validator


@cache
def _strict_class(base: type[jsonschema.protocols.Validator]) -> type[jsonschema.protocols.Validator]:
    """`base` with whole-string patterns: made once a draft, as extending a validator class builds a new class
    (1 ms, twenty times the cost of validating a short document)."""
    cls: type[jsonschema.protocols.Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, validators={"pattern": _whole_pattern}
    )
    return cls


def _whole_pattern(
    validator: jsonschema.protocols.Validator, pattern: str, instance: object, schema: Json
) -> Iterator[jsonschema.ValidationError]:
    if isinstance(instance, str) and not _compiled(pattern).fullmatch(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


KEY_LIST_MAX = 12  # keys named in an unknown-key message: one line a terminal shows whole


def _key_list(known: list[str]) -> str:
    """The known keys, at most KEY_LIST_MAX of them named, and where the rest are (the schema describes each)."""
    if len(known) <= KEY_LIST_MAX:
        return ", ".join(known)
    rest = len(known) - KEY_LIST_MAX
    return f"{', '.join(known[:KEY_LIST_MAX])} and {rest} more (the schema describes each: accelenv schema)"


def _explain(error: jsonschema.ValidationError) -> tuple[tuple[str | int, ...], str]:
    """A key path and a message in words for one schema error."""
    path = tuple(error.absolute_path)
    schema: Json = error.schema if isinstance(error.schema, dict) else {}
    match error.validator:
        case "additionalProperties":
            known = sorted(schema.get("properties", {}))
            unknown = [k for k in error.instance if k not in known] if isinstance(error.instance, dict) else []
            messages = []
            for key in unknown:
                close = suggest(key, known)
                hint = f"; did you mean '{close}'?" if close else f"; known keys: {_key_list(known)}"
                messages.append(f"unknown key '{key}'{hint}")
            if len(unknown) == 1:
                return (*path, unknown[0]), messages[0]
            return path, "; ".join(messages)
        case "required":
            missing = str(error.message).split("'")[1] if "'" in str(error.message) else str(error.message)
            description = schema.get("properties", {}).get(missing, {}).get("description", "")
            suffix = f" ({description})" if description else ""
            return path, f"missing required key '{missing}'{suffix}"
        case "pattern" if "propertyNames" in error.absolute_schema_path:
            hint = schema.get("x-hint", "a lower-case id")
            return (*path, str(error.instance)), (
                f"{error.instance!r} is not a valid key: expected {hint}{_lower_case(error)}"
            )
        case "pattern":
            hint = schema.get("x-hint", f"a value matching {error.validator_value}")
            if error.instance == "":
                return path, f"must not be empty: expected {hint}"
            return path, f"{error.instance!r} is not valid here: expected {hint}{_lower_case(error)}"
        case "enum":
            options = [str(v) for v in schema.get("enum", ())]
            allowed = ", ".join(repr(v) for v in options)
            close = suggest(str(error.instance), options)
            hint = f"; did you mean {close!r}?" if close else ""
            return path, f"{error.instance!r} is not one of {allowed}{hint}"
        case "type":
            return path, f"expected {error.validator_value}, found {type(error.instance).__name__} {error.instance!r}"
        case "const":
            return path, f"must be {error.validator_value!r}, found {error.instance!r}"
        case "uniqueItems":
            return _duplicate(path, error.instance)
        case "minItems":
            return path, "must not be empty"
        case "minProperties":
            return path, "must have at least one entry"
        case _:
            return path, str(error.message)


def _duplicate(path: tuple[str | int, ...], items: object) -> tuple[tuple[str | int, ...], str]:
    """The second occurrence of the first item a list repeats, and what to do."""
    seen: dict[str, int] = {}
    for i, item in enumerate(items if isinstance(items, list) else []):
        key = json.dumps(item, sort_keys=True, default=str)
        if key in seen:
            return (*path, i), f"lists {item!r} twice (also at [{seen[key]}]): keep one"
        seen[key] = i
    return path, "lists the same item twice: keep one"


def _lower_case(error: jsonschema.ValidationError) -> str:
    """`; write '0x74a0'` when the value's lower-case form is what the pattern wants: ids and PCI ids are
    lower-case (hex), and the value differs in case only."""
    instance, pattern = error.instance, error.validator_value
    if not isinstance(instance, str) or not isinstance(pattern, str) or instance.lower() == instance:
        return ""
    if not _compiled(pattern).fullmatch(instance.lower()):
        return ""
    return f" (lower-case: write {instance.lower()!r})"


class SchemaError(NamedTuple):
    path: tuple[str | int, ...]
    message: str
    keeps_entry: bool  # the entry still reads the same (a repeated list item): the rules may still look at it


def schema_errors(document: object) -> list[SchemaError]:
    """Every schema violation of a parsed matrix as (key path, message in words), in document order."""
    found: list[SchemaError] = []
    errors = _validator().iter_errors(document)  # type: ignore[arg-type]
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        for leaf in _leaves(error):
            path, message = _explain(leaf)
            # a repeated pin is the requirements rule's to report ("already required at packages[0]")
            keeps = leaf.validator == "uniqueItems" and leaf.absolute_path and leaf.absolute_path[-1] != "packages"
            # an unknown key: the model is built from the known ones, so the rules still judge the entry
            keeps = keeps or leaf.validator == "additionalProperties"
            found.append(SchemaError(path, message, bool(keeps)))
    return found


def _leaves(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    # `additionalProperties` with `$ref` reports errors of the referenced schema as context-less errors already;
    # only combinators (anyOf/oneOf) carry sub-errors, and we use none. Kept for safety if one is added.
    if error.context:
        return [leaf for sub in error.context for leaf in _leaves(sub)]
    return [error]
