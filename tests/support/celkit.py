"""Test support: DRA selectors evaluated by a real CEL interpreter (`common-expression-language`, the Rust `cel`
crate), with the Kubernetes extensions the generated selectors use implemented here to Kubernetes' documented
semantics, and the device attributes each vendor's DRA driver would publish for a host accelenv has probed.

Kubernetes' semver library (k8s.io/apiserver/pkg/cel/library/semverlib.go, on blang/semver v4): `semver(s)`
parses `s` strictly as SemVer 2.0.0 (three numeric parts, no leading zeros, no `v`) and is an error otherwise;
`a.compareTo(b)` is -1, 0 or 1 by SemVer precedence (build metadata ignored, a pre-release below its release);
`isGreaterThan`, `isLessThan` follow it; `major()`, `minor()`, `patch()` are the parts. A DRA version attribute
is such a value. A selector that reads a missing attribute is an error, which aborts the allocation, so the
evaluation here raises instead of answering False.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
TAG = "__semver__"


class CelError(Exception):
    """The selector failed to evaluate: Kubernetes aborts the allocation."""


def semver(text: str) -> dict[str, Any]:
    """A SemVer value, as `semver()` makes it; ValueError (a CEL error) for anything Kubernetes refuses."""
    match = _SEMVER.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid semver {text!r}")
    major, minor, patch, pre = match.groups()
    return {TAG: [int(major), int(minor), int(patch)], "pre": pre.split(".") if pre else []}


def _key(identifier: str) -> tuple[int, int | str]:
    return (0, int(identifier)) if identifier.isdigit() else (1, identifier)


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    if a[TAG] != b[TAG]:
        return -1 if a[TAG] < b[TAG] else 1
    if a["pre"] == b["pre"]:
        return 0
    if not a["pre"] or not b["pre"]:  # a release is above its pre-releases
        return 1 if not a["pre"] else -1
    ka, kb = [_key(x) for x in a["pre"]], [_key(x) for x in b["pre"]]
    return -1 if ka < kb else 1


def evaluate(expression: str, device: Mapping[str, Any]) -> bool:
    """`expression` for `device` ({"driver": ..., "attributes": {domain: {...}}}), as the scheduler evaluates a
    DRA selector: True or False, or CelError."""
    import cel

    context = cel.Context()
    context.add_function("semver", semver)
    context.add_function("compareTo", compare)
    context.add_function("isGreaterThan", lambda a, b: compare(a, b) > 0)
    context.add_function("isLessThan", lambda a, b: compare(a, b) < 0)
    context.add_function("major", lambda v: v[TAG][0])
    context.add_function("minor", lambda v: v[TAG][1])
    context.add_function("patch", lambda v: v[TAG][2])
    context.add_variable("device", dict(device))
    try:
        result = cel.evaluate(expression, context)
    except Exception as error:  # the interpreter's own error types
        raise CelError(f"{error}: {expression[:200]}") from error
    if not isinstance(result, bool):
        raise CelError(f"a selector must give a bool, gave {result!r}")
    return result


def selects(expressions: Sequence[str], device: Mapping[str, Any]) -> bool:
    """Every selector of a DeviceClass (and of the request) holds: the device may be allocated."""
    return all(evaluate(e, device) for e in expressions)


# ---- what each vendor's DRA driver publishes for a device accelenv probed ------------------------------------


def nvidia_version(text: str) -> str:
    """What NVIDIA's driver publishes for an NVML driver version: Masterminds semver's parse printed back (parts
    as integers, missing parts 0): 580.105.08 -> 580.105.8, 595.80 -> 595.80.0."""
    parts = [str(int(p)) for p in text.strip().split(".")]
    return ".".join([*parts, "0", "0"][:3])


def amd_version(module: str) -> str:
    """AMD's `SemverDriverVersion`: the module version cut to its first three dot-separated parts."""
    return ".".join(module.split(".")[:3])


def amd_product_name(name: str) -> str:
    """AMD's driver: sysfs product_name trimmed, spaces as _, parentheses dropped."""
    return name.strip().replace(" ", "_").replace("(", "").replace(")", "")
