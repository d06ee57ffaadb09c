"""`accelenv lock`: each environment's requirements lock (and OS package lock), and `lock --check` (offline)."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, TextIO

from accelenv.cli.common import Command, matrix_of, repo_of, seconds
from accelenv.cli.output import dump_json
from accelenv.excerpts import clip

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from accelenv.matrix.model import Environment, Matrix
    from accelenv.plan.digests import Verifier
    from accelenv.plan.provenance import LockProvenance


def lock_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("envs", nargs="*", metavar="ENV", help="environments (default: all)")
    p.add_argument("--check", action="store_true", help="exit 1 if a lock no longer matches the matrix (offline)")
    p.add_argument("--require-all", action="store_true", help="with --check: an unlocked environment fails too")
    p.add_argument("--force", action="store_true", help="resolve again even when the lock is current")
    p.add_argument("--timeout", type=seconds, default=900.0, metavar="S", help="per resolution (default %(default)gs)")
    p.add_argument(
        "--platform",
        metavar="PLATFORM",
        help="OS package locks for this platform (linux/arm64; `all`: every platform the environment declares), "
        "resolved in that platform's base image, under QEMU emulation where it is foreign (default: the engine's "
        "own). The Python lock always covers every declared platform",
    )
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="take each file's sha256 from the index's answer without downloading the file to check it (the lock's "
        "header, lock --check and validate then say its hashes are unverified)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="with --check: a lock that does not record its provenance, or whose hashes are unverified, fails too",
    )
    p.add_argument("--verbose", action="store_true", help="with --check: the index each package came from")
    p.add_argument("--json", action="store_true", help="print one result per environment as JSON")


def lock(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.resolve import get_env

    matrix = matrix_of(args)
    envs = [get_env(matrix, e) for e in args.envs] if args.envs else list(matrix.envs.values())
    if args.check:
        return _lock_check(args, matrix, envs, out)
    from accelenv.changeset import refuse_if_pending
    from accelenv.fileio import write_atomic
    from accelenv.matrix.paths import lock_path
    from accelenv.plan.audit import lock_provenance
    from accelenv.plan.digests import Verifier
    from accelenv.plan.lock import LockState, glibc_of, lock_state
    from accelenv.plan.provenance import relock
    from accelenv.plan.resolver import resolve

    repo = repo_of(args)
    refuse_if_pending(repo)  # an interrupted refresh is finished or undone first
    verify = None if args.no_verify else Verifier(progress=sys.stderr)
    rows: list[dict[str, Any]] = []
    failed = 0 if _lock_image_dependencies(repo, args, out, verify) else 1
    os_locker = _OsLocker(repo, force=args.force, platform=args.platform)
    for env in envs:
        glibc = glibc_of(matrix, env)
        os_row = os_locker.lock_all(matrix, env)
        if os_row and not args.json:
            out.write(f"{env.id:<24} {os_row}\n")
        found = lock_provenance(repo, env) if lock_state(repo, env, glibc) is LockState.CURRENT else None
        if found is not None and not found.is_error and not args.force:
            warning = found.warning(relock(env.id))
            rows.append({"env": env.id, "state": "current", "problem": None, "warning": warning, "os_packages": os_row})
            if not args.json:
                out.write(f"{env.id:<24} current (use --force to resolve again)\n")
                out.write(f"{'':<24} warning: {warning}\n" if warning else "")
            continue
        if not args.json:
            why = "; its lock names an index the matrix does not declare" if found and found.is_error else ""
            out.write(f"{env.id:<24} resolving for {', '.join(env.platforms)}{why} ...\n")
            out.flush()
        result = resolve(env, glibc=glibc, timeout=args.timeout, verify=verify)
        if result.text is None:
            failed += 1
            rows.append({"env": env.id, "state": str(lock_state(repo, env, glibc)), "problem": result.problem})
            if not args.json:
                out.write(f"{env.id:<24} not locked: {result.problem}\n")
            continue
        write_atomic(lock_path(repo, env.id), result.text, inside=repo)
        hashes = "unverified" if verify is None else "verified"
        rows.append({"env": env.id, "state": "current", "problem": None, "hashes": hashes, "os_packages": os_row})
        if not args.json:
            pins = sum(1 for line in result.text.splitlines() if "==" in line and not line.startswith((" ", "#")))
            files = f"{len(result.files)} files checked" if verify else "hashes UNVERIFIED (--no-verify)"
            rel = lock_path(repo, env.id).relative_to(repo)
            out.write(f"{env.id:<24} locked: {pins} distributions, {files} -> {rel}\n")
    os_locker.close()
    if args.json:
        dump_json(rows, out)
    return 1 if failed else 0


def _lock_image_dependencies(repo: Path, args: argparse.Namespace, out: TextIO, verify: Verifier | None) -> bool:
    """envs/accelenv-image.lock: what accelenv needs inside every image, hash-locked. False when it failed."""
    from accelenv.fileio import write_atomic
    from accelenv.plan.audit import image_lock_provenance
    from accelenv.plan.lock import LockState, image_lock_path, image_lock_state
    from accelenv.plan.provenance import relock
    from accelenv.plan.render import IMAGE_DEPENDENCIES
    from accelenv.plan.resolver import resolve_image_lock

    rel = image_lock_path(repo).relative_to(repo)
    if image_lock_state(repo, IMAGE_DEPENDENCIES) is LockState.CURRENT and not args.force:
        found = image_lock_provenance(repo)
        if found is not None and not found.is_error:
            warning = found.warning(relock(""))
            out.write(f"{rel}: current; warning: {warning}\n" if warning and not args.json else "")
            return True
    result = resolve_image_lock(IMAGE_DEPENDENCIES, timeout=args.timeout, verify=verify)
    if result.text is None:
        out.write(f"{rel}: not locked: {result.problem}\n")
        return False
    write_atomic(image_lock_path(repo), result.text, inside=repo)
    if not args.json:
        out.write(f"{rel}: locked" + (f", {len(result.files)} files checked\n" if verify else ", hashes UNVERIFIED\n"))
    return True


class _OsLocker:
    """OS package locks, made by asking apt inside the base image (network on), with one engine connection made
    when the first one is needed. A base that cannot be run here leaves the lock absent: a warning, not a
    failure (a maintainer who can pull the base locks it; `accelenv build` refuses until then)."""

    def __init__(self, repo: Path, *, force: bool, platform: str | None = None) -> None:
        self.repo = repo
        self.force = force
        self.platform = platform
        self.engine: Any = None
        self.engine_problem: str | None = None

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()

    def _engine(self) -> Any:
        from accelenv.build.engine import EngineError, connect

        if self.engine is None and self.engine_problem is None:
            try:
                self.engine = connect()
            except EngineError as error:
                self.engine_problem = str(error)
        return self.engine

    def lock_all(self, matrix: Matrix, env: Environment) -> str | None:
        """What happened to the OS locks of `env` for the platforms asked for, or None when its base ships its
        Python (no OS lock needed)."""
        from accelenv.build.platforms import host_platform, platforms_for

        native = host_platform()
        wanted = platforms_for(env, self.platform, native=native)
        rows = [row for platform in wanted if (row := self.lock(matrix, env, platform, native=native))]
        return "; ".join(rows) or None

    def lock(self, matrix: Matrix, env: Environment, platform: str, *, native: str) -> str | None:
        """What happened to the OS lock of `env` for `platform`, or None when its base ships its Python."""
        from accelenv.build import overrides
        from accelenv.build.engine import EngineError, RunSpec
        from accelenv.build.platforms import base_reference, emulation_problem, image_platform
        from accelenv.fileio import write_atomic
        from accelenv.plan.lock import (
            DPKG_ARCHITECTURES,
            LockState,
            OsLock,
            apt_script,
            os_lock_name,
            os_lock_path,
            os_lock_state,
            parse_apt_output,
            render_os_lock,
        )
        from accelenv.plan.render import os_packages

        override = overrides.load(self.repo, matrix).get(env.id)  # a stand-in's lock lives beside its override
        matrix = overrides.apply(matrix, env, override)
        packages = os_packages(matrix, env)
        if not packages:
            return None
        reference = matrix.runtimes[env.runtime].base_images[env.os].reference
        if override:  # a stand-in's locks live beside its override, one per platform
            path = overrides.override_lock_path(self.repo, env.id).with_name(os_lock_name(platform))
        else:
            path = os_lock_path(self.repo, env.id, platform)
        rel = path.relative_to(self.repo)
        state = os_lock_state(self.repo, env.id, reference, packages, platform, path=path)
        if state is LockState.CURRENT and not self.force:
            return f"{rel}: current"
        warning = f"{rel}: not locked (warning: the image cannot be built until it is)"
        engine = self._engine()
        if engine is None:
            return f"{warning}: {self.engine_problem}"
        emulation = emulation_problem(platform, native=native)
        if emulation is not None:
            return f"{warning}: {emulation}"
        local = base_reference(reference, platform, native=native)
        base = engine.image(local)
        if base is None and override is None and platform == native:
            with contextlib.suppress(EngineError):  # a registry out of reach: said below
                engine.pull(reference, lambda line: sys.stderr.write(f"  {reference}: {line}\n"))
            base = engine.image(reference)
        if base is None:
            return (
                f"{warning}: its base {reference} for {platform} is not on this engine (as {local}) and could not be "
                f"pulled; lock it where it can be pulled, or on a local stand-in: accelenv base make {env.id}"
            )
        if image_platform(base) != platform:
            stated = base.architecture or "no architecture"
            return f"{warning}: the engine's {local} states {stated}, not {platform}"
        lines: list[str] = []
        try:
            code = engine.run(RunSpec(image=base.id, command=["sh", "-c", apt_script(packages)]), lines.append)
        except EngineError as error:
            return f"{warning}: {error}"
        try:
            if code != 0:
                raise ValueError(f"apt exited {code}: {clip(' '.join(lines[-3:]), 400)}")
            architecture, found = parse_apt_output("\n".join(lines) + "\n")
            if architecture != DPKG_ARCHITECTURES[platform]:
                raise ValueError(f"dpkg in the base says {architecture}, not {DPKG_ARCHITECTURES[platform]}")
        except ValueError as error:
            return f"{warning}: {error}"
        pin = base.digests[0] if base.digests else base.id
        text = render_os_lock(
            env.id, packages, OsLock(base=reference, pin=pin, architecture=architecture, packages=tuple(found))
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text, inside=self.repo)
        return f"{rel}: locked {len(found)} packages from {reference} ({pin[:19]})"


def _lock_check(args: argparse.Namespace, matrix: Matrix, envs: list[Environment], out: TextIO) -> int:
    from accelenv.matrix.paths import lock_path
    from accelenv.plan.audit import image_lock_provenance, lock_provenance
    from accelenv.plan.lock import LockState, glibc_of, image_lock_path, image_lock_state, lock_state
    from accelenv.plan.render import IMAGE_DEPENDENCIES

    repo = repo_of(args)
    rows = []
    for env in envs:
        state = lock_state(repo, env, glibc_of(matrix, env))
        found = lock_provenance(repo, env) if state is LockState.CURRENT else None
        rows.append(
            {
                "env": env.id,
                "state": str(state),
                "path": str(lock_path(repo, env.id).relative_to(repo)),
                "os_packages": _os_lock_check(repo, matrix, env),
                **_provenance_fields(found, env.id),
            }
        )
    image_state = image_lock_state(repo, IMAGE_DEPENDENCIES)
    image = _provenance_fields(image_lock_provenance(repo) if image_state is LockState.CURRENT else None, "")
    stale = [r for r in rows if r["state"] == LockState.STALE]
    unlocked = [r for r in rows if r["state"] == LockState.UNLOCKED]
    refused = [r for r in [*rows, image] if r["errors"]]
    warned = [r for r in [*rows, image] if r["warning"]]
    if args.json:
        dump_json(rows, out)
    else:
        hint = {"unlocked": "  (no lock)"}
        for r in rows:
            extra = f"  (the matrix changed: run accelenv lock {r['env']})" if r["state"] == "stale" else ""
            out.write(f"{r['env']!s:<24} {r['state']}{extra or hint.get(str(r['state']), '')}\n")
            if r["os_packages"] not in (None, "current"):
                out.write(f"{'':<24} {r['os_packages']}\n")
            _provenance_lines(r, out, verbose=args.verbose)
        image_rel = image_lock_path(repo).relative_to(repo)
        out.write(
            f"{image_rel!s:<24} {image_state}" + ("" if image_state == "current" else ": run accelenv lock") + "\n"
        )
        _provenance_lines(image, out, verbose=args.verbose)
        summary = f"{len(rows) - len(stale) - len(unlocked)} current, {len(stale)} stale, {len(unlocked)} unlocked"
        summary += (
            f"; {len(refused)} refused (a pin from an undeclared index, or provenance unclear)" if refused else ""
        )
        summary += f"; {len(warned)} that do not record provenance or checked hashes" if warned else ""
        out.write(summary + "\n")
    os_stale = [r for r in rows if str(r["os_packages"]).startswith(("stale", "error"))]
    image_bad = image_state is LockState.STALE or (args.require_all and image_state is LockState.UNLOCKED)
    unproven = refused or (args.strict and warned)
    return 1 if stale or os_stale or image_bad or unproven or (args.require_all and unlocked) else 0


def _provenance_fields(found: LockProvenance | None, env_id: str) -> dict[str, Any]:
    """What a current lock says about its pins' indexes and hashes, as fields of a `lock --check` row (nulls for
    a lock that is stale or missing: it is made again anyway)."""
    from accelenv.plan.provenance import relock
    from accelenv.redact import redact_text

    if found is None:
        return {"provenance": None, "hashes": None, "errors": [], "warning": None, "packages": []}
    return {
        "provenance": str(found.provenance),
        "hashes": str(found.hashes),
        "errors": list(found.problems),
        "warning": found.warning(relock(env_id)),
        "packages": [
            {"name": pin.name, "version": pin.version, "index": redact_text(pin.index) if pin.index else None}
            for pin in found.pins
        ],
    }


def _provenance_lines(row: dict[str, Any], out: TextIO, *, verbose: bool) -> None:
    from accelenv.redact import terminal_safe

    for error in row["errors"]:
        out.write(f"{'':<24} error: {error}\n")
    if row["warning"]:
        out.write(f"{'':<24} warning: {row['warning']}\n")
    if verbose:
        for package in row["packages"]:
            source = terminal_safe(package["index"]) if package["index"] else "(no index recorded)"
            out.write(f"{'':<24}   {package['name']}=={package['version']}  from {source}\n")


def _os_lock_check(repo: Path, matrix: Matrix, env: Environment) -> str | None:
    """The state of an environment's OS package lock, as a line: None when its base ships its Python."""
    from accelenv.build.overrides import committed_standin_lock
    from accelenv.plan.lock import OS_LOCK_NAME, LockState, os_lock_defect, os_lock_state
    from accelenv.plan.render import os_packages

    if standin := committed_standin_lock(repo, env.id):
        return f"error: {standin}: delete it (git rm envs/{env.id}/{OS_LOCK_NAME})"
    packages = os_packages(matrix, env)
    if not packages:
        return None
    reference = matrix.runtimes[env.runtime].base_images[env.os].reference
    state = os_lock_state(repo, env.id, reference, packages)
    if state is LockState.UNLOCKED:
        return (
            f"warning: {OS_LOCK_NAME} missing: {reference} lacks Python {env.python}; not buildable until a "
            f"maintainer who can pull it runs `accelenv lock {env.id}`"
        )
    if state is LockState.STALE:
        why = os_lock_defect(repo, env.id) or "the base or its packages changed"
        return f"stale {OS_LOCK_NAME}: {why}: run accelenv lock {env.id}"
    return "current"


COMMANDS = {
    "lock": Command(
        epilog="examples:\n  accelenv lock                      # every environment whose lock is missing or stale\n"
        "  accelenv lock cpu-py311 --force\n  accelenv lock --check              # CI: no lock is stale (offline)\n"
        "  accelenv lock --check --verbose    # and the index each package came from\n\n"
        "Only the resolver writes a lock. An environment whose index cannot be reached stays unlocked, and\n"
        "its nox session says so. Every file a lock names is downloaded and its sha256 checked (progress on\n"
        "stderr; a file checked before, by URL and hash, is not downloaded again: ~/.cache/accelenv/verified-files);\n"
        "--no-verify skips that, and the lock says so. lock --check refuses a package from an index the\n"
        "environment does not declare, and warns about a lock that does not record where its packages came from.",
        arguments=lock_arguments,
        run=lock,
    ),
}
