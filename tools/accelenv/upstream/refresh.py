"""`accelenv refresh`: what `outdated` found, written into the matrix as a change a maintainer can review.

The plan is pure: the matrix text and `outdated`'s findings in, the new text and a summary out.
- A newer release of a pin (not held back by its runtime's `hold`) is a bumped pin.
- A newer jax whose `[tpu]` extra pins another libtpu is a new release line: a new TPU runtime and environment
  beside the old ones (the old ones stay until the new one has passed CI), jax, jaxlib and libtpu moving together.
- A new CUDA, ROCm or Neuron line, a new framework line and a new device id are named, not written: each needs
  facts no index carries (driver floors, driver lists, a SKU's identity) from the vendor's notes.
The result must validate, or nothing is written. The edge (`cli/upstream.py`) then re-locks what changed,
dropping the changes of an environment whose lock cannot be resolved, and renders.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

import tomlkit

from accelenv.errors import MatrixInvalidError
from accelenv.matrix.edit import add_entry
from accelenv.matrix.load import validate_text
from accelenv.matrix.model import canonical_name
from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient
    from accelenv.upstream.outdated import Finding, Problem

TPU_PACKAGES = ("jax", "jaxlib", "libtpu")  # one release line: jax[tpu] pins libtpu exactly


@frozen
class TpuLine:
    """A newer jax and the libtpu its `[tpu]` extra pins, as read from the index (`tpu_line`)."""

    jax: str
    libtpu: str
    requires_python: str | None


@frozen
class Change:
    kind: Literal["bump", "new-line"]
    env: str
    summary: str


@frozen
class Skipped:
    what: str
    why: str


@frozen
class RefreshPlan:
    text: str
    changes: tuple[Change, ...]
    skipped: tuple[Skipped, ...]
    problems: tuple[str, ...] = ()
    envs: tuple[str, ...] = field(default=())  # environments whose pins changed or that are new: re-lock them

    @property
    def empty(self) -> bool:
        return not self.changes


def plan_refresh(
    text: str,
    matrix: Matrix,
    findings: Iterable[Finding],
    problems: Iterable[Problem] = (),
    *,
    tpu_lines: Mapping[str, TpuLine] | None = None,
    exclude_envs: Collection[str] = (),
) -> RefreshPlan:
    """The new matrix text for `findings` (see the module's docstring). `tpu_lines` maps a TPU runtime id to the
    newer jax line found for it; `exclude_envs` leaves an environment's changes out (its lock would not
    resolve). Raises `MatrixInvalidError` when the result would not validate."""
    from accelenv.upstream.outdated import problem_lines

    tpu_lines = tpu_lines or {}
    changes: list[Change] = []
    skipped: list[Skipped] = []
    new_envs: list[str] = []
    moved: set[tuple[str, str]] = set()  # (env, package) that move with a new TPU line instead of a bump
    additions: list[tuple[str, str, list[str], str]] = []  # kind, id, assignments, template
    live = [f for f in findings if not f.held]
    for runtime_id, line in tpu_lines.items():
        planned = _tpu_line(matrix, runtime_id, line, live, skipped)
        if planned is None:
            continue
        runtime_entry, env_entries = planned
        env_entries = [(entry, old) for entry, old in env_entries if entry[1] not in exclude_envs]
        if not env_entries:
            skipped.append(Skipped(what=f"jax {line.jax} line", why="its environments' locks could not be resolved"))
            continue
        additions.append(runtime_entry)
        for env_entry, old_env in env_entries:
            additions.append(env_entry)
            new_envs.append(env_entry[1])
            moved.update((old_env, p) for p in TPU_PACKAGES)
            changes.append(
                Change(
                    kind="new-line",
                    env=env_entry[1],
                    summary=f"jax {line.jax} with libtpu {line.libtpu}, beside {old_env} (runtime {runtime_entry[1]})",
                )
            )
    bumps: dict[str, dict[str, str]] = {}
    for f in live:
        if f.kind == "package":
            if (f.env, canonical_name(f.name)) in moved:
                continue
            if f.env in exclude_envs:
                skipped.append(Skipped(what=f"{f.name} {f.latest} in {f.env}", why="its lock could not be resolved"))
                continue
            bumps.setdefault(f.env, {})[canonical_name(f.name)] = f.latest
        elif f.kind == "runtime" and f.name.endswith(".x"):
            skipped.append(
                Skipped(
                    what=f"{f.name}: {f.current} -> {f.latest}",
                    why="a new runtime line needs facts no index carries (driver floor or driver list, base image): "
                    f"add it with `accelenv add runtime ... --from {f.env}` from the vendor's notes",
                )
            )
        elif f.kind == "framework":
            skipped.append(Skipped(what=f"{f.name} {f.latest} (a new framework line)", why=f.note))
        elif f.kind == "sku":
            skipped.append(Skipped(what=f.name, why="a new device: add it with `accelenv add sku` (name, arch, floor)"))
        elif f.env not in tpu_lines:  # a runtime component (jax of a TPU runtime) with no line to move to
            skipped.append(Skipped(what=f"{f.name} {f.latest} for runtime {f.env}", why=f.note))
    new_text = _bump(text, matrix, bumps, changes)
    for kind, entry_id, assignments, template in additions:
        new_text = add_entry(
            new_text, kind, entry_id, assignments, template, copy_from="all"
        )  # a new line of the same runtime
    validation = validate_text(new_text, source="matrix.toml")
    if any(p.is_error for p in validation.problems):
        raise MatrixInvalidError("matrix.toml as refresh would write it (nothing written)", validation.problems)
    touched = [e for e in bumps if e not in exclude_envs] + [e for e in new_envs if e not in exclude_envs]
    return RefreshPlan(
        text=new_text,
        changes=tuple(c for c in changes if c.env not in exclude_envs),
        skipped=tuple(skipped),
        problems=tuple(problem_lines(problems)),
        envs=tuple(dict.fromkeys(touched)),
    )


def _bump(text: str, matrix: Matrix, bumps: Mapping[str, Mapping[str, str]], changes: list[Change]) -> str:
    if not bumps:
        return text
    document = tomlkit.parse(text)
    for env_id, versions in bumps.items():
        packages = document["envs"][env_id]["requirements"]["packages"]
        for i, item in enumerate(list(packages)):
            name, sep, current = str(item).partition("==")
            latest = versions.get(canonical_name(name.strip()))
            if sep and latest is not None and current.strip() != latest:
                packages[i] = f"{name.strip()}=={latest}"
                changes.append(Change(kind="bump", env=env_id, summary=f"{name.strip()} {current.strip()} -> {latest}"))
                framework = document["envs"][env_id].get("framework")
                if framework is not None and canonical_name(str(framework.get("name", ""))) == canonical_name(name):
                    framework["version"] = latest  # the declared framework is that pin: it moves with it
    return tomlkit.dumps(document)


def _slug(version: str, parts: int) -> str:
    return "-".join(version.split(".")[:parts])


def _tpu_line(
    matrix: Matrix, runtime_id: str, line: TpuLine, findings: list[Finding], skipped: list[Skipped]
) -> tuple[tuple[str, str, list[str], str], list[tuple[tuple[str, str, list[str], str], str]]] | None:
    """The new TPU runtime entry and one environment entry per environment of the old runtime."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    old = matrix.runtimes[runtime_id]
    new_id = f"libtpu-{_slug(line.libtpu, 3)}"
    if new_id in matrix.runtimes:
        skipped.append(Skipped(what=f"libtpu {line.libtpu}", why=f"the matrix has runtime {new_id} already"))
        return None
    runtime = (
        "runtime",
        new_id,
        [
            f'version="{line.libtpu}"',
            f'name="libtpu {_slug(line.libtpu, 3).replace("-", ".")} (jax {line.jax})"',
            f'components.jax="{line.jax}"',
            f'components.jaxlib="{line.jax}"',
        ],
        runtime_id,
    )
    envs = []
    for env in (e for e in matrix.envs.values() if e.runtime == runtime_id):
        try:
            fits = line.requires_python is None or SpecifierSet(line.requires_python).contains(
                env.python, prereleases=True
            )
        except InvalidSpecifier:
            fits = True
        if not fits:
            skipped.append(
                Skipped(
                    what=f"jax {line.jax} for {env.id}",
                    why=f"jax {line.jax} needs Python {line.requires_python}; {env.id} runs {env.python}",
                )
            )
            continue
        new_env = _new_env_id(env, old.components.get("jax", ""), line.jax, matrix)
        packages = _packages_with(env, line, findings)
        envs.append(
            (
                (
                    "env",
                    new_env,
                    [
                        f'runtime="{new_id}"',
                        f'description="JAX {line.jax} on libtpu {line.libtpu} (refreshed from {env.id})"',
                        "requirements.packages=[" + ", ".join(f'"{p}"' for p in packages) + "]",
                        *([f'framework.version="{line.jax}"'] if env.framework and env.framework.name == "jax" else []),
                    ],
                    env.id,
                ),
                env.id,
            )
        )
    return (runtime, envs) if envs else None


def _new_env_id(env: Environment, old_jax: str, new_jax: str, matrix: Matrix) -> str:
    old_slug, new_slug = _slug(old_jax, 2), _slug(new_jax, 2)
    candidate = env.id.replace(old_slug, new_slug) if old_slug and old_slug in env.id else f"{env.id}-jax-{new_slug}"
    return candidate if candidate not in matrix.envs else f"{candidate}-refresh"


def _packages_with(env: Environment, line: TpuLine, findings: list[Finding]) -> list[str]:
    """The environment's pins with the new jax line, and the other pins' newer releases."""
    newer = {canonical_name(f.name): f.latest for f in findings if f.kind == "package" and f.env == env.id}
    pinned = {"jax": line.jax, "jaxlib": line.jax, "libtpu": line.libtpu}
    out = []
    for name, version in env.requirements.pins:
        key = canonical_name(name)
        out.append(f"{name}=={pinned.get(key) or newer.get(key) or version}")
    return out


_TPU_EXTRA = re.compile(r"^libtpu\s*==\s*([0-9][0-9.]*)(\.\*)?\s*;.*extra\s*==\s*['\"]tpu['\"]")


def tpu_line(client: IndexClient, jax_version: str) -> TpuLine | str:
    """The libtpu that jax `jax_version`'s `[tpu]` extra pins, resolved to its newest release (`0.0.50.*` ->
    0.0.50.1), from the index's metadata; or why it cannot be said."""
    from packaging.version import InvalidVersion, Version

    from accelenv.upstream.indexes import PYPI_SIMPLE, Releases, _Failure

    data = client.json(f"{client.pypi_url}/pypi/jax/json")
    if isinstance(data, _Failure):  # unreachable, too slow, too large, not JSON: the message says which
        return data.message
    info = data.get("info") if isinstance(data, dict) else None
    if not isinstance(info, dict) or str(info.get("version")) != jax_version:
        return f"PyPI's jax page does not describe jax {jax_version}"
    prefix = None
    for requirement in info.get("requires_dist") or []:
        match = _TPU_EXTRA.match(str(requirement))
        if match:
            prefix = (match.group(1), bool(match.group(2)))
    if prefix is None:
        return f"jax {jax_version} names no libtpu in its [tpu] extra"
    releases = client.releases(PYPI_SIMPLE, "libtpu")
    if not isinstance(releases, Releases):
        return releases.message if isinstance(releases, _Failure) else "PyPI has no libtpu"
    base, wildcard = prefix
    chosen: Version | None = None
    for text in releases.versions:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease:
            continue
        if text == base or (wildcard and text.startswith(base + ".")):
            chosen = version if chosen is None or version > chosen else chosen
    if chosen is None:
        return f"no libtpu release matches jax {jax_version}'s pin {base}{'.*' if wildcard else ''}"
    requires = info.get("requires_python")
    return TpuLine(jax=jax_version, libtpu=str(chosen), requires_python=str(requires) if requires else None)


def summary_markdown(
    plan: RefreshPlan, *, locked: Collection[str] = (), unlocked: Mapping[str, str] | None = None
) -> str:
    """The pull request body: what changed, what was left out and why, what could not be checked."""
    lines = ["## accelenv refresh", ""]
    if plan.changes:
        lines += ["### Changed", ""]
        lines += [
            f"- `{c.env}`: {c.summary}" + (" (new environment)" if c.kind == "new-line" else "") for c in plan.changes
        ]
        lines.append("")
    else:
        lines += [
            "Nothing to change: every pin that could be checked is current or held back by the support window.",
            "",
        ]
    if locked:
        lines += ["Re-locked: " + ", ".join(f"`{e}`" for e in locked), ""]
    for env, why in (unlocked or {}).items():
        lines.append(f"- `{env}` could not be re-locked, so its changes were left out: {why}")
    if plan.skipped:
        lines += ["### Left out", ""]
        lines += [f"- {s.what}: {s.why}" for s in plan.skipped]
        lines.append("")
    if plan.problems:
        lines += ["### Could not be checked", ""]
        lines += [f"- {p}" for p in plan.problems]
        lines.append("")
    lines.append("New environments are not the family default: make one the default once its CI has passed.")
    return "\n".join(lines) + "\n"
