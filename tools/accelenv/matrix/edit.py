"""`accelenv add`, `attach`, `detach`: matrix.toml edited by hand's rules.

A new entry is placed after the last entry of its family in its section (an AMD SKU after the other AMD SKUs,
under the file's `# ---- AMD ...` header), or, for a family the section has no entry of yet, at the end of the
section under a new header of its own when the section is laid out in such headers. Everything else in the file
(comments, order, layout) is untouched. The result must validate: otherwise nothing is written and every
problem is shown.

`--from OTHER` copies only the facts meant to be shared between entries of one kind (`SHARED`): for a SKU its
family, architecture and host CPUs, never what identifies one device (name, product names, PCI ids, memory,
driver floor, sources, notes). The edit says what it copied and what it left for you to give.

Command-line values are TOML, typed by the schema (`edit_values.py`); `key=` with nothing after the `=` unsets
the key (one `--from` copied, or one set earlier on the line).
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import TYPE_CHECKING, Any, Literal

import tomlkit
import tomlkit.exceptions
import tomlkit.items

from accelenv.errors import MatrixInvalidError, UsageError
from accelenv.matrix import validate_text
from accelenv.matrix.edit_values import SECTIONS, key_parts, set_key, toml_kind, typed_value, unset_key
from accelenv.matrix.problems import Problem
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path


SHARED: dict[str, tuple[str, ...]] = {
    # a SKU's device class: what another model of the same generation has too. Its driver floor is not shared:
    # it is the release that first lists the device's own PCI id (docs/adding-an-accelerator.md).
    "sku": ("family", "arch", "host_arch"),
    # a runtime's family and the architectures to start from (check them with the release's own compiler); its
    # version, components, driver rule and base images are facts of one release
    "runtime": ("family", "architectures"),
    # an environment is a variation of another: everything but what says which one it is
    "env": (
        "family",
        "runtime",
        "os",
        "python",
        "platforms",
        "skus",
        "requirements",
        "tests",
        "ci_tier",
        "ci_runner",
        "ci_queue",
        "requires",
    ),
}
"""What `add KIND ID --from OTHER` copies from OTHER, per kind. Everything else is given on the command line."""

Copy = Literal["shared", "all"]
BANNER = "# ---- "  # how the matrix opens a group of entries within a section: `# ---- AMD Instinct ----...`


@frozen
class Edit:
    """The matrix text after an edit, and what the edit did, for the command to tell."""

    text: str
    copied: tuple[str, ...] = ()  # keys --from copied
    not_copied: tuple[str, ...] = ()  # keys of the template it left out (identity facts)
    unset: tuple[str, ...] = ()  # keys `key=` removed
    attached: tuple[str, ...] = ()  # environments the SKU was put in (attach) or taken out of (detach)
    unchanged: tuple[str, ...] = ()  # environments that already had it (attach) or did not have it (detach)
    warnings: tuple[Problem, ...] = ()  # what validate warns about the new text for the edited entries


# ---------------------------------------------------------------------------------------------------- placement


def _header(section: str, entry_id: str) -> str:
    key = entry_id if entry_id.replace("-", "").replace("_", "").isalnum() else f'"{entry_id}"'
    return f"[{section}.{key}]"


def _render(section: str, entry_id: str, table: Any) -> str:
    body = tomlkit.dumps(table).strip("\n")
    return f"{_header(section, entry_id)}\n{body}\n"


def _entry_of(line: str, section: str) -> str | None:
    """The entry id a table header line of `section` opens (`[skus.mi300x]`, `[os."ubuntu24.04"]`,
    `[envs.x.requirements]` -> x), or None."""
    if not line.startswith(f"[{section}.") or line.startswith("[["):
        return None
    header = line.split("#", 1)[0].strip() if '"' not in line else line.strip()
    try:
        parsed = tomlkit.parse(header + "\n")
    except tomlkit.exceptions.TOMLKitError:
        return None
    table = parsed.get(section)
    return next(iter(table), None) if isinstance(table, dict) else None


def _end_of_entry(lines: list[str], last: int) -> int:
    """The line after the entry whose last header is at `last` (before trailing blank and comment lines, which
    belong to what follows: the next banner)."""
    end = last + 1
    while end < len(lines) and not lines[end].startswith("["):
        end += 1
    while end > last + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return end


def _placement(lines: list[str], section: str, family: str | None, document: Any) -> tuple[int, list[str]]:
    """(where the new entry goes, banner lines to put before it). After the last entry of the same family in the
    section; else at the end of the section, under a new `# ---- <family> ----` banner when the section's entries
    are grouped under such banners (so a new family's first SKU is not filed under the CPU banner)."""
    headers = [(i, _entry_of(line, section)) for i, line in enumerate(lines)]
    headers = [(i, entry) for i, entry in headers if entry is not None]
    if not headers:
        return len(lines), []
    entries = document.get(section, {})
    same = [i for i, entry in headers if family is not None and _family_of(entries.get(entry)) == family]
    if same:
        return _end_of_entry(lines, max(same)), []
    end = _end_of_entry(lines, headers[-1][0])
    first = headers[0][0]
    banners = [line for line in lines[first:end] if line.startswith(BANNER)]
    if family is None or not banners:
        return end, []
    title = _family_title(document, family)
    width = max(len(line) for line in banners)
    banner = f"{BANNER}{title} "
    return end, [banner + "-" * max(4, width - len(banner)), ""]


def _family_of(entry: Any) -> str | None:
    family = entry.get("family") if isinstance(entry, dict) else None
    return str(family) if isinstance(family, str) else None


def _family_title(document: Any, family: str) -> str:
    entry = document.get("families", {}).get(family)
    name = entry.get("name") if isinstance(entry, dict) else None
    return str(name) if isinstance(name, str) else family


# ---------------------------------------------------------------------------------------------------- add


def add_to_file(
    path: Path,
    kind: str,
    entry_id: str,
    assignments: list[str],
    template: str | None,
    *,
    dry_run: bool,
    envs: Sequence[str] = (),
) -> tuple[str, Edit]:
    """(old text, the edit) of the matrix at `path` with the new entry. Unless `dry_run`, written: under the
    matrix folder's lock, through a symlinked matrix.toml to its target, and only if nobody changed the file
    meanwhile (another `add`, a `pin`, an editor)."""
    return _edit_file(
        path, lambda old: plan_add(old, kind, entry_id, assignments, template, source=str(path), envs=envs), dry_run
    )


def _edit_file(path: Path, plan: Callable[[str], Edit], dry_run: bool) -> tuple[str, Edit]:
    from accelenv.fileio import read_text, update_text

    if dry_run:
        old = read_text(path, what="matrix")
        return old, plan(old)
    edits: list[Edit] = []

    def change(old: str) -> str:
        edits.append(plan(old))
        return edits[-1].text

    old, _ = update_text(path, change, what="matrix")
    return old, edits[-1]


def add_entry(
    text: str,
    kind: str,
    entry_id: str,
    assignments: list[str],
    template: str | None,
    *,
    source: str = "matrix.toml",
    copy_from: Copy = "shared",
) -> str:
    """The matrix text with the new entry (see `plan_add`)."""
    return plan_add(text, kind, entry_id, assignments, template, source=source, copy_from=copy_from).text


def plan_add(
    text: str,
    kind: str,
    entry_id: str,
    assignments: list[str],
    template: str | None,
    *,
    source: str = "matrix.toml",
    envs: Sequence[str] = (),
    copy_from: Copy = "shared",
) -> Edit:
    """The matrix text with the new entry (a SKU also put in `envs`); raises UsageError or MatrixInvalidError
    (nothing written). `copy_from="all"` copies the whole template: for `refresh`, whose new runtime line is the
    old one with newer pins. The text keeps its line endings (CRLF stays CRLF)."""
    section = SECTIONS[kind]
    _check_id(kind, entry_id)
    if envs and kind != "sku":
        raise UsageError(f"--env puts a SKU in environments; a {kind} is not put in one")
    newline = "\r\n" if "\r\n" in text else "\n"
    text = text.replace("\r\n", "\n")
    document = _parse(text, source)
    existing = document.get(section, {})
    if entry_id in existing:
        raise UsageError(f"{section}.{entry_id} already exists; edit it in matrix.toml or choose another id")
    copied: tuple[str, ...] = ()
    not_copied: tuple[str, ...] = ()
    if template is not None:
        table, copied, not_copied = _from_template(kind, section, existing, template, copy_from)
    else:
        table = tomlkit.table()
    unset: list[str] = []
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"{assignment!r}: expected KEY=VALUE, e.g. arch='\"sm_90\"' or pci_device_ids='[\"0x2330\"]'"
            )
        key, value = key.strip(), value.strip()
        if not value:
            unset_key(table, key_parts(key), template)
            unset.append(key)
            continue
        set_key(table, key_parts(key), typed_value(kind, key, value, entry_id))
    lines = text.splitlines()
    at, banner = _placement(lines, section, _family_of(table), document)
    block = [*banner, *_render(section, entry_id, table).splitlines()]
    new_lines = [*lines[:at], "", *block, *lines[at:]]
    new_text = "\n".join(new_lines) + "\n"
    attached: tuple[str, ...] = ()
    if envs:
        attach_edit = _attach(new_text, entry_id, envs, detach=False, source=source, validate=False)
        new_text, attached = attach_edit.text, attach_edit.attached
    warnings = _validated(new_text, source, f"{section}.{entry_id}", [f"{section}.{entry_id}"])
    return Edit(
        text=new_text.replace("\n", newline),
        copied=copied,
        not_copied=not_copied,
        unset=tuple(unset),
        attached=attached,
        warnings=warnings,
    )


def _from_template(
    kind: str, section: str, existing: Any, template: str, copy_from: Copy
) -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
    if template not in existing:
        close = _close(template, [str(k) for k in existing])
        hint = f"; did you mean '{close}'?" if close else ""
        name = template if re.fullmatch(r"[a-z0-9._-]{1,80}", template) else shown(template)
        raise UsageError(f"--from {name}: no {section}.{name}{hint}")
    whole = copy.deepcopy(existing[template])
    if kind == "env" and "default" in whole:
        del whole["default"]  # one default per family: a copy never takes it over
    if copy_from == "all":
        return whole, tuple(str(k) for k in whole), ()
    shared = SHARED.get(kind)
    if shared is None:
        raise UsageError(f"--from copies SKUs, runtimes and environments; give every key of the new {kind} instead")
    copied = tuple(str(k) for k in whole if k in shared)
    left = tuple(str(k) for k in whole if k not in shared)
    for key in left:
        del whole[key]  # deleting from the copy keeps how the rest is written (dotted keys stay dotted)
    return whole, copied, left


def _validated(text: str, source: str, what: str, paths: Sequence[str]) -> tuple[Problem, ...]:
    """The warnings about `paths` (entries the edit touched) of a new text that must validate; raises
    MatrixInvalidError with every error otherwise, saying nothing was written. The problems carry no line: the
    lines are those of a text that was not written."""
    from accelenv import records

    validation = validate_text(text, source=source)
    errors = tuple(records.replace(p, line=None) for p in validation.problems if p.is_error)
    if errors:
        raise MatrixInvalidError(
            source, errors, hint=f"nothing written ({what}): fix what is shown above and run the command again"
        )
    return tuple(
        records.replace(p, line=None)
        for p in validation.problems
        if any(p.path == path or p.path.startswith((f"{path}.", f"{path}[")) for path in paths)
    )


# ---------------------------------------------------------------------------------------------------- attach


def attach_to_file(path: Path, sku: str, envs: Sequence[str], *, detach: bool, dry_run: bool) -> tuple[str, Edit]:
    """`accelenv attach` / `detach` on the matrix at `path`, written like `add_to_file` (nothing when there is
    nothing to change)."""
    return _edit_file(path, lambda old: plan_attach(old, sku, envs, detach=detach, source=str(path)), dry_run)


def plan_attach(text: str, sku: str, envs: Sequence[str], *, detach: bool, source: str = "matrix.toml") -> Edit:
    """The matrix text with SKU `sku` added to (or removed from) the `skus` list of each of `envs`; raises
    UsageError for an unknown id and MatrixInvalidError when the result would not validate. Environments that
    already have it (or, detaching, do not) are left as they are and named in `unchanged`."""
    newline = "\r\n" if "\r\n" in text else "\n"
    edit = _attach(text.replace("\r\n", "\n"), sku, envs, detach=detach, source=source, validate=True)
    return Edit(
        text=edit.text.replace("\n", newline),
        attached=edit.attached,
        unchanged=edit.unchanged,
        warnings=edit.warnings,
    )


def _attach(text: str, sku: str, envs: Sequence[str], *, detach: bool, source: str, validate: bool) -> Edit:
    document = _parse(text, source)
    skus, environments = document.get("skus", {}), document.get("envs", {})
    unknown = []
    if sku not in skus:
        unknown.append(_unknown("SKU", "skus", sku, skus))
    unknown += [_unknown("environment", "envs", env, environments) for env in envs if env not in environments]
    if unknown:
        raise UsageError("; ".join(unknown))
    for env_id in dict.fromkeys(envs):
        current = environments[env_id].get("skus") if isinstance(environments[env_id], dict) else None
        if current is not None and (not isinstance(current, list) or isinstance(current, tomlkit.items.AoT)):
            # never replaced: a string or a table there is the user's to fix, not ours to overwrite
            kind = "list of tables" if isinstance(current, list) else toml_kind(current)
            what = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
            raise UsageError(
                f"{source}: envs.{env_id}.skus is {what}, not a list of SKU ids; write it as a list "
                f'(skus = ["{sku}", ...]) and run the command again; nothing written'
            )
    changed, unchanged = [], []
    for env_id in dict.fromkeys(envs):
        env = environments[env_id]
        current = env.get("skus")
        has = isinstance(current, list) and sku in current
        if has != detach:
            unchanged.append(env_id)
            continue
        changed.append(env_id)
        if detach:
            for index in reversed([i for i, s in enumerate(current) if s == sku]):  # every copy of a duplicate
                del current[index]
        elif isinstance(current, list):
            current.append(sku)
        else:
            env["skus"] = [sku]
    new_text = tomlkit.dumps(document) if changed else text
    warnings: tuple[Problem, ...] = ()
    if validate and changed:
        verb = "out of" if detach else "in"
        paths = [f"skus.{sku}", *(f"envs.{e}" for e in changed)]
        warnings = _validated(new_text, source, f"{sku} {verb} {', '.join(changed)}", paths)
    return Edit(text=new_text, attached=tuple(changed), unchanged=tuple(unchanged), warnings=warnings)


def _unknown(what: str, section: str, wanted: str, known: Any) -> str:
    close = _close(wanted, [str(k) for k in known])
    hint = f"did you mean '{close}'?" if close else f"known: {', '.join(sorted(str(k) for k in known)) or 'none'}"
    return f"no {what} {shown(wanted)} under [{section}]; {hint}"


def _close(wanted: str, known: list[str]) -> str | None:
    """The known id `wanted` was likely meant as: the one it is once Unicode lookalikes are folded (NFKC: `l4`
    typed with U+217C SMALL ROMAN NUMERAL FIFTY is `l4`; a full-width letter is its ASCII one), else the closest
    spelling."""
    import unicodedata

    folded = unicodedata.normalize("NFKC", wanted[:200]).casefold()
    same = [k for k in known if k.casefold() == folded]
    return same[0] if same else next(iter(difflib.get_close_matches(wanted[:200], known, n=1)), None)


def shown(text: str, limit: int = 80) -> str:
    """`text` (an id from the command line) as a message shows it: quoted, on one line (a newline or a quote in
    it is escaped), and cut after `limit` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


# ---------------------------------------------------------------------------------------------------- shared


def _check_id(kind: str, entry_id: str) -> None:
    from accelenv.schema_values import ENV_ID, ENV_ID_MAX, ID, OS_LABEL

    pattern, hint, longest = {
        "os": (OS_LABEL, "an OS label such as ubuntu24.04", None),
        "env": (ENV_ID, "lower-case letters, digits and dashes", ENV_ID_MAX),  # it must fit a label key
    }.get(kind, (ID, "lower-case letters, digits and dashes", 64))
    if not re.fullmatch(pattern, entry_id):
        import unicodedata

        lower = unicodedata.normalize("NFKC", entry_id[:200]).lower()  # U+217C (a Roman numeral) + "4" is `l4`
        suggestion = f" (write {lower!r})" if lower != entry_id and re.fullmatch(pattern, lower) else ""
        if longest is not None and len(entry_id) > longest:
            hint += f", at most {longest} characters"
        raise UsageError(f"{shown(entry_id)} is not a valid {kind} id: expected {hint}{suggestion}")


def _parse(text: str, source: str) -> Any:
    """The tomlkit document of the matrix, or every problem with it (as `validate` reports them)."""
    if text.startswith("\ufeff"):
        raise UsageError(
            f"{source} starts with a byte-order mark (BOM); TOML files are UTF-8 without one: save it without"
        )
    try:
        return tomlkit.parse(text)
    except (tomlkit.exceptions.TOMLKitError, RecursionError) as error:
        problems = tuple(p for p in validate_text(text, source=source).problems if p.is_error)
        if not problems:
            problems = (Problem(path="", message=f"accelenv cannot edit it: {error}", rule="toml"),)
        raise MatrixInvalidError(source, problems) from error


def diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
