"""What `accelenv run` settles before a container starts: the image is the one the matrix declares now (its
env-hash label), and the family's devices can be given on this engine (`wiring.choose`). Either refuses with
the fix rather than letting the engine fail, or the container start with nothing said."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv import records
from accelenv.build.wiring import choose
from accelenv.errors import AccelenvError
from accelenv.host.cdi import read_specs
from accelenv.plan.render import LABEL_PREFIX, env_hash

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO

    from accelenv.build.engine import DockerEngine, RunSpec
    from accelenv.build.wiring import EngineCaps, Wiring
    from accelenv.check.verdict import Finding
    from accelenv.host.report import HostReport
    from accelenv.host.root import Root
    from accelenv.matrix import Environment, Matrix


class RefusedError(AccelenvError):
    """The container would not get what the environment needs: refused before it starts. Exit 125, as `docker
    run` exits when the container could not be started, so it stays apart from the command's own exit status
    (which `run` passes through) and from accelenv's 3, a bug."""

    exit_code = 125


def image_refusal(matrix: Matrix, env: Environment, reference: str, labels: dict[str, str] | None) -> str:
    """Why the image at `reference` is not the environment the matrix declares now ("" when it is)."""
    if labels is None:
        return f"no image {reference}: build it first (accelenv build {env.id})"
    expected = f"sha256:{env_hash(matrix, env)}"
    found = labels.get(f"{LABEL_PREFIX}.env-hash")
    if found == expected:
        return ""
    what = "has no env-hash label (not built by accelenv build)" if found is None else f"was built from {found}"
    return (
        f"{reference} {what}; the matrix declares {env.id} as {expected} now: rebuild it (accelenv build {env.id}), "
        "or pass --stale-ok to run it as it is"
    )


def wiring_for(
    engine: DockerEngine, matrix: Matrix, env: Environment, *, root: Root, environ: Mapping[str, str]
) -> tuple[EngineCaps, Wiring]:
    caps = engine.capabilities()
    driver = loaded_driver(matrix, env.family, root=root, environ=environ)
    return caps, choose(matrix.families[env.family], caps, read_specs(root), root, environ, driver=driver)


def loaded_driver(matrix: Matrix, family: str, *, root: Root, environ: Mapping[str, str]) -> str | None:
    """The family's loaded driver exactly as `check` reads it: the host report's driver_version, from the same
    discovery (the kernel module where it can be read, the vendor tool where not)."""
    from accelenv.host.discover import discover
    from accelenv.host.run import ToolRunner

    report = discover(matrix, root=root, runner=ToolRunner(), environ=environ, families=[family], topology=False)
    acc = report.accelerator(family)
    return acc.driver_version if acc else None


def wired(spec: RunSpec, wiring: Wiring) -> RunSpec:
    """`spec` with the devices `wiring` chose, in place of the family's default wiring."""
    return records.replace(
        spec,
        devices=list(wiring.devices),
        gpus=wiring.gpus,
        runtime=wiring.runtime,
        cdi_devices=list(wiring.cdi_devices),
    )


def wiring_finding(matrix: Matrix, env: Environment, caps: EngineCaps, wiring: Wiring) -> Finding | None:
    """verify's word on the devices: how `accelenv run` would give them on this engine, or why it cannot (None
    for a family without devices)."""
    from accelenv.check.verdict import Finding, Status

    if wiring.way == "none" and not wiring.refusal:
        return None
    family = matrix.families[env.family]
    return Finding(
        id="container.devices",
        status=Status.FAIL if wiring.refusal else Status.PASS,
        expected=f"a way to give {family.name} devices to the container",
        found=f"{caps.product} {caps.version}: {wiring.refusal or wiring.reason}",
        message="accelenv run cannot give the devices on this engine"
        if wiring.refusal
        else "accelenv run gives the devices this way",
        fix=wiring.refusal,
    )


def devices_finding(
    engine: DockerEngine, matrix: Matrix, env: Environment, *, root: Root, environ: Mapping[str, str]
) -> list[Finding]:
    caps, wiring = wiring_for(engine, matrix, env, root=root, environ=environ)
    finding = wiring_finding(matrix, env, caps, wiring)
    return [finding] if finding else []


def settle(
    engine: DockerEngine,
    matrix: Matrix,
    env: Environment,
    spec: RunSpec,
    *,
    root: Root,
    environ: Mapping[str, str],
    stale_ok: bool,
    no_devices: bool,
    err: TextIO,
) -> RunSpec:
    """`spec` once the image is known to be the matrix's (or `stale_ok`) and its devices can be given (or
    `no_devices`), wired as chosen; the engine, the choice and its reason go to `err`. Raises RefusedError
    before anything starts."""
    from accelenv.build.wiring import Wiring

    image = engine.image(spec.image)
    problem = image_refusal(matrix, env, spec.image, None if image is None else image.labels)
    if problem and (image is None or not stale_ok):
        raise RefusedError(problem)
    if problem:
        err.write(f"warning: {problem.split('; the matrix')[0]}; running it anyway (--stale-ok)\n")
    caps, wiring = wiring_for(engine, matrix, env, root=root, environ=environ)
    err.write(f"engine: {caps.describe()}\n")
    if no_devices:
        wiring = Wiring(way="none", reason="none: --no-devices (the container gets no accelerator)")
    elif wiring.refusal:
        raise RefusedError(
            f"{env.id}: the container cannot get its {matrix.families[env.family].name} devices: {wiring.refusal} "
            "(or pass --no-devices to start it without them)"
        )
    err.write(wiring.line() + "\n")
    err.flush()
    return wired(spec, wiring)


def engine_lines(matrix: Matrix, report: HostReport, *, root: Root, environ: Mapping[str, str]) -> list[str]:
    """inspect's engine section: the engine DOCKER_HOST reaches (or why none answers), its version, CDI, its
    runtimes, and per family whether `accelenv run` can give it devices there, and how."""
    from accelenv.build.engine import EngineError, connect

    try:
        engine = connect(timeout=5)
    except EngineError as error:
        return [f"engine      none: {error}"]
    with engine:
        try:
            caps = engine.capabilities()
        except EngineError as error:
            return [f"engine      {engine.info().host}: {error}"]
    specs = read_specs(root)
    lines = [f"engine      {caps.describe()}"]
    for family in matrix.families.values():
        if not family.pci_vendor_ids:
            continue
        acc = report.accelerator(family.id)
        wiring = choose(family, caps, specs, root, environ, driver=acc.driver_version if acc else None)
        verdict = f"no: {wiring.refusal}" if wiring.refusal else f"yes: {wiring.reason}"
        lines.append(f"  {family.id:<9} {verdict}")
    return lines
