"""What `accelenv outdated` reports: newer releases of what the matrix pins (`Finding`s), what could not be asked
(`Problem`s), and the report they make for a terminal, as issue-ready Markdown or as JSON.

The flow is the codebase's: the parsed matrix -> one lookup per (index, project) at the edge (`IndexClient` in
`indexes.py`: PyPI's JSON API or a PEP 691 / PEP 503 simple index) and one per release source -> the pure
choice of a newer release -> `Finding`s and `Problem`s -> rendered here. `survey.py` asks every source:
the pinned packages (`packages.py`), runtimes' release lines (`release_lines.py`), NVIDIA's new devices
(`nvidia_devices.py`) and the sources with modules of their own (`sources.py`). An index that cannot be asked
(connection refused, timeout, 404 on every index, 429, a page that does not parse) becomes a `Problem`, never an
exception, so one report says everything at once.
"""

from __future__ import annotations

import json
import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from accelenv.records import frozen
from accelenv.upstream.settings import IndexSettings

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from packaging.version import Version

    from accelenv.matrix.model import Runtime

RELEASE_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "nvidia": "CUDA release lines from NVIDIA's runtime wheels on PyPI (nvidia-cuda-runtime-cu12, "
        "nvidia-cuda-runtime); new device ids from the supported-GPU table of the newest release of NVIDIA's open "
        "kernel modules (GitHub) and from pci.ids releases; driver branches from NVIDIA's releases.json. Driver "
        "floors, cuDNN and NCCL come from HTML release notes, not read.",
        "amd": "ROCm release lines from TheRock's GitHub release feed and from JAX's ROCm plugins on PyPI "
        "(jax-rocm<major>-plugin names the ROCm it is built against). AMD's driver lists per release are HTML and "
        "YAML docs, not read.",
        "tpu": "libtpu and jax releases on PyPI.",
        "neuron": "Neuron SDK releases from AWS's release manifest n2-manifest.json and aws-neuron-sdk's GitHub "
        "release feed.",
    }
)
"""Where each family's releases are read from (`survey.check_matrix`)."""

NO_MACHINE_READABLE_SOURCE: Mapping[str, str] = MappingProxyType(
    {
        "gaudi": "Intel Gaudi software releases are an HTML support matrix (docs.habana.ai) and image tags on "
        "vault.habana.ai, whose tag list needs that registry's API: no machine-readable release list to read.",
    }
)
"""Runtime families whose releases `survey.check_matrix` cannot check, and why."""

NEURON_MANIFEST_URL = (
    "https://raw.githubusercontent.com/aws-neuron/aws-neuron-sdk/master/src/helperscripts/n2-manifest.json"
)
NVIDIA_TAGS_URL = "https://api.github.com/repos/NVIDIA/open-gpu-kernel-modules/tags?per_page=100"
NVIDIA_README_URL = "https://raw.githubusercontent.com/NVIDIA/open-gpu-kernel-modules/{tag}/README.md"
MAX_SOURCE = 8 * 1024 * 1024  # the release manifest, the tag list, the README: some hundred KiB today


# ---- what comes out ----------------------------------------------------------------------------------------------


@frozen
class Finding:
    """A newer release than the matrix pins: a package of an environment, or a component of a runtime."""

    kind: Literal["package", "runtime", "sku", "framework"]
    env: str  # the environment id; the runtime id for kind "runtime"; the family for kind "sku"
    name: str
    current: str
    latest: str
    index: str
    note: str = ""
    held: str = ""  # the matrix's reason for staying (runtimes.<id>.hold): news, not a lag

    @property
    def key(self) -> str:
        """The dotted matrix key to change."""
        if self.kind == "package":
            return f"envs.{self.env}.requirements.packages"
        if self.kind == "sku":
            return "skus (a new entry)"
        if self.kind == "framework":
            return "envs (a new entry for its runtime line)"
        if self.name == "libtpu":
            return f"runtimes.{self.env}.version"
        if self.name == "driver branch":  # a newer NVIDIA driver branch (nvidia_branches.py)
            return f"runtimes.{self.env}.driver"
        if self.name.startswith("base image "):  # a newer tag of a base image (registry_tags.py)
            return f"runtimes.{self.env}.base_images"
        if self.name.endswith(".x"):  # a new release line: CUDA 13.x, ROCm 10.x, Neuron SDK 2.x
            return "runtimes (a new entry beside runtimes." + self.env + ")"
        return f"runtimes.{self.env}.components.{self.name}"

    def as_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "env": self.env,
            "name": self.name,
            "current": self.current,
            "latest": self.latest,
            "index": self.index,
            "key": self.key,
            "note": self.note,
            "held": self.held,
        }


@frozen
class Problem:
    """A pin that could not be checked, and why (the index could not be asked, or nothing knows the package)."""

    env: str
    name: str
    index: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"env": self.env, "name": self.name, "index": self.index, "message": self.message}


@frozen
class ReleaseSourceUrls:
    """Where the release sources outside the package indexes are asked (tests point them at loopback)."""

    neuron_manifest: str = NEURON_MANIFEST_URL
    nvidia_tags: str = NVIDIA_TAGS_URL
    nvidia_readme: str = NVIDIA_README_URL  # with {tag}
    rocm_feed: str = "https://github.com/ROCm/TheRock/releases.atom"
    neuron_feed: str = "https://github.com/aws-neuron/aws-neuron-sdk/releases.atom"
    pci_ids: str = "https://raw.githubusercontent.com/pciutils/pciids/master/pci.ids"
    nvidia_releases: str = "https://docs.nvidia.com/datacenter/tesla/drivers/releases.json"
    registry: str | None = None  # replaces every base image's registry (tests: a loopback registry)


def new_line(
    runtimes: list[tuple[Version, Runtime]], major: int, top: Version, *, label: str, index: str, note: str
) -> Finding | None:
    """A finding when `top` is a newer release line (major.minor) than every runtime of `major` in the matrix."""
    in_matrix = [(v, r) for v, r in runtimes if v.major == major]
    have = max((v for v, _ in in_matrix), default=None)
    if have is not None and (top.major, top.minor) <= (have.major, have.minor):
        return None
    owner = max(in_matrix or runtimes, key=lambda pair: pair[0])[1].id
    return Finding(
        kind="runtime",
        env=owner,
        name=f"{label} {major}.x",
        current=f"{have.major}.{have.minor}" if have is not None else f"none of {label} {major}.x",
        latest=f"{top.major}.{top.minor}",
        index=index,
        note=note,
    )


# ---- rendering ---------------------------------------------------------------------------------------------------


_GET = re.compile(r"^GET (\S+) ")


def problem_lines(problems: Iterable[Problem]) -> list[str]:
    """One short line per (environment, index, reason): the pins an index could not answer for, grouped, the
    per-project URL replaced by the index it belongs to."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for p in problems:
        match = _GET.match(p.message)
        rest = p.message[match.end() :].removeprefix("failed: ") if match else ""
        text = f"{p.index}: {rest}" if match and match.group(1).startswith(p.index) else p.message
        grouped.setdefault((p.env, text), []).append(p.name)
    return [f"{env}: {', '.join(dict.fromkeys(names))}: {text}" for (env, text), names in grouped.items()]


def trouble_head(problems: Iterable[Problem], trouble: list[str]) -> str:
    """The count over the could-not-be-checked lines, in lines (what the reader counts below it), and the pins
    behind them when a line groups several."""
    pins = len({(p.env, p.name) for p in problems})
    head = f"{len(trouble)} line(s) could not be checked"
    return head if pins == len(trouble) else f"{head} ({pins} pins; one line per environment and cause)"


def render_github(findings: Iterable[Finding], problems: Iterable[Problem] = ()) -> str:
    """One issue-ready Markdown section per finding: what is newer, where it was found, which key to change.
    Releases held back by the matrix's support window are listed after them, with the reason, not as issues;
    pins that could not be checked close the report, one line each."""
    findings = list(findings)
    sections = []
    for f in (f for f in findings if not f.held):
        where = f"environment `{f.env}`" if f.kind == "package" else f"runtime `{f.env}`"
        change = (
            f"`{f.name}=={f.current}` → `{f.name}=={f.latest}`"
            if f.kind == "package"
            else f"`{f.current}` → `{f.latest}`"
        )
        lines = [
            f"### {f.name} {f.latest} is out ({where} pins {f.current})",
            "",
            "| current | latest | index |",
            "| --- | --- | --- |",
            f"| `{f.current}` | `{f.latest}` | {f.index} |",
            "",
            f"Change `{f.key}` in `matrix.toml`: {change}.",
        ]
        if f.note:
            lines += ["", f"Note: {f.note}."]
        sections.append("\n".join(lines) + "\n")
    held = [f for f in findings if f.held]
    if held:
        lines = [
            "### Held back by the support window",
            "",
            "| what | pinned | newer | why it stays |",
            "| --- | --- | --- | --- |",
        ]
        lines += [f"| {f.name} (`{f.env}`) | `{f.current}` | `{f.latest}` | {f.held} |" for f in held]
        sections.append("\n".join(lines) + "\n")
    trouble = problem_lines(problems)
    if trouble:
        lines = ["### Could not be checked", "", *(f"- {line}" for line in trouble)]
        sections.append("\n".join(lines) + "\n")
    if not any(not f.held for f in findings):
        head = (
            "Nothing to update: every newer release found is held back by the support window."
            if held
            else "No newer releases found."
        )
        if trouble:
            head += f" {len(trouble)} line(s) below could not be checked, so this is not the whole answer."
        sections.insert(0, head + "\n")
    return "\n".join(sections)


def render_table(findings: Iterable[Finding], problems: Iterable[Problem]) -> str:
    """Findings as aligned columns, then the held ones, then what could not be checked, then the runtime
    families nothing here can check."""
    findings = list(findings)
    problems = list(problems)
    rows = [("KIND", "ENV", "NAME", "CURRENT", "LATEST", "INDEX")]
    rows += [(f.kind, f.env, f.name, f.current, f.latest, f.index) for f in findings if not f.held]
    lines = []
    if len(rows) > 1:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines += ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in rows]
    elif problems:
        lines.append("no newer release found among what could be checked; some pins could not be (below)")
    else:
        lines.append("every pinned package and runtime checked is current, or held back by the support window")
    held = [f for f in findings if f.held]
    if held:
        lines += ["", f"{len(held)} held back by the support window (news, not a lag):"]
        lines += [f"  {f.env}: {f.name} {f.current} -> {f.latest}: {f.held}" for f in held]
    trouble = problem_lines(problems)
    if trouble:
        lines += ["", f"{trouble_head(problems, trouble)}:"]
        lines += [f"  {line}" for line in trouble]
    lines += ["", f"runtimes not checked (no machine-readable release source): {', '.join(NO_MACHINE_READABLE_SOURCE)}"]
    return "\n".join(lines) + "\n"


def as_json(findings: Iterable[Finding], problems: Iterable[Problem], *, settings: IndexSettings | None = None) -> str:
    """The whole report as JSON, deterministic (sorted keys), for `accelenv outdated --json`."""
    settings = settings or IndexSettings()
    document = {
        "findings": [f.as_json() for f in findings],
        "problems": [p.as_json() for p in problems],
        "not_checked": dict(NO_MACHINE_READABLE_SOURCE),
        "release_sources": dict(RELEASE_SOURCES),
        "indexes": {
            "main": settings.main,
            "extra": list(settings.extra),
            "strategy": settings.strategy,
            "origin": settings.origin,
        },
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
