"""One environment with everything it depends on spelled out: what `accelenv show` prints and env.json holds.

Pure: takes the model, returns plain JSON-ready data in a stable order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelenv.errors import UsageError
from accelenv.matrix.problems import suggest

if TYPE_CHECKING:
    from packaging.version import Version

    from accelenv.matrix.driver_need import DriverNeed
    from accelenv.matrix.model import DriverRule, Environment, Matrix

Json = dict[str, Any]


def get_env(matrix: Matrix, env_id: str) -> Environment:
    """The environment named `env_id`, or a usage error that suggests the closest id."""
    if env_id in matrix.envs:
        return matrix.envs[env_id]
    by_session = {f.session: f.id for f in matrix.families.values()}
    if env_id in by_session and (default := matrix.default_env(by_session[env_id])):
        return default
    close = suggest(env_id, [*matrix.envs, *by_session])
    hint = f"did you mean '{close}'?" if close else "run `accelenv list` to see them"
    raise UsageError(f"no environment '{env_id}' in {matrix.path}; {hint}")


def _v(version: Version | None) -> str | None:
    return str(version) if version is not None else None


def _driver(matrix: Matrix, rule: DriverRule) -> Json:
    releases = [matrix.drivers[r] for r in rule.releases if r in matrix.drivers]
    return {
        "min": _v(rule.min),
        "compat_min": _v(rule.compat_min),
        "max": _v(rule.max),
        "accepted": list(rule.accepted),
        "releases": [
            {"id": r.id, "release": r.release, "reports": r.reports, "reported_as": r.reported_as} for r in releases
        ],
        "notes": rule.notes,
    }


def _need_json(need: DriverNeed) -> Json:
    """A SKU's driver need as `show --json` gives it (see `driver_need`)."""
    return {
        "driver_floor": _v(need.full),
        "driver_runs_from": _v(need.runs_from),
        "driver_raised": need.raised,
        "driver_branches": {f"R{branch}": str(v) for branch, v in need.branches},
    }


def index_options(env: Environment) -> list[str]:
    """pip's and uv's options naming the environment's indexes (none: PyPI)."""
    options = ["--index-url", env.requirements.index_url] if env.requirements.index_url else []
    for url in env.requirements.extra_index_urls:
        options += ["--extra-index-url", url]
    return options


def pip_command(env: Environment) -> list[str]:
    """The pip invocation that installs the environment's pins from its indexes."""
    return [f"python{env.python}", "-m", "pip", "install", *index_options(env)] + [
        str(r) for r in env.requirements.packages
    ]


def resolve(matrix: Matrix, env: Environment) -> Json:
    import shlex  # `show` quotes the install command; `check`, which finds environments here, does not

    from accelenv.matrix.driver_need import driver_need  # with the driver branches: not on a cpu check's path

    family = matrix.families[env.family]
    rt = matrix.runtimes[env.runtime]
    image = rt.base_images[env.os]
    skus = matrix.env_skus(env)
    cited = dict.fromkeys([*env.sources, *rt.sources, *family.sources, *(s for sku in skus for s in sku.sources)])
    return {
        "id": env.id,
        "description": env.description,
        "default": env.default,
        "ci_tier": str(env.ci_tier),
        "family": {
            "id": family.id,
            "name": family.name,
            "maturity": str(family.maturity),
            "session": family.session,
            "visible_devices_env": list(family.visible_devices_env),
            "host_tools": list(family.host_tools),
            "kernel_modules": list(family.kernel_modules),
            "container": {
                "env": dict(family.container_env),
                "devices": list(family.container_devices),
                "groups": list(family.container_groups),
                "gpus": family.container_gpus,
                "runtime": family.container_runtime,
                "shm_size": family.container_shm_size,
                "ipc": family.container_ipc,
                "cdi_kind": family.container_cdi_kind,
            },
        },
        "os": env.os,
        "python": env.python,
        "platforms": list(env.platforms),
        "runtime": {
            "id": rt.id,
            "name": rt.name,
            "version": _v(rt.version),
            "wheel_tag": rt.wheel_tag,
            "components": dict(rt.components),
            "architectures": list(rt.architectures),
            "driver": _driver(matrix, rt.driver),
        },
        "base_image": {
            "reference": image.reference,
            "repository": image.repository,
            "tag": image.tag,
            "digest": image.digest,
            "pinned": image.digest is not None,
            "python": image.python,
        },
        "os_base": {
            "id": env.os,
            "name": matrix.os[env.os].name,
            "python": matrix.os[env.os].python,
            "package_manager": matrix.os[env.os].package_manager,
        },
        "skus": [
            {
                "id": sku.id,
                "name": sku.name,
                "arch": sku.arch,
                "product_names": list(sku.product_names),
                "pci_device_ids": list(sku.pci_device_ids),
                "memory_mib": sku.memory_mib,
                "host_arch": list(sku.host_arch),
                "driver_min": _v(sku.driver_min),
                **_need_json(driver_need(matrix, rt, sku)),
                "ray_accelerator_type": dict(sku.ray_accelerator_type) or None,
                "no_ray_accelerator_type": sku.no_ray_accelerator_type or None,
            }
            for sku in skus
        ],
        "requirements": {
            "packages": [str(r) for r in env.requirements.packages],
            "index_url": env.requirements.index_url,
            "extra_index_urls": list(env.requirements.extra_index_urls),
        },
        "install": shlex.join(pip_command(env)),
        "tests": list(env.tests),
        "requires": {k: v for k, v in vars(env.requires).items() if v not in (None, False)},
        "sources": [
            {"id": s, "title": matrix.sources[s].title, "url": matrix.sources[s].url, "where": matrix.sources[s].where}
            for s in cited
            if s in matrix.sources
        ],
    }
