"""Read `matrix.toml`: TOML -> schema -> model -> rules, reporting every problem at once.

An entry that breaks the schema is left out of the model (its problems are reported), so the rules still run
on everything else and a broken SKU does not hide a wrong environment. References to a left-out entry are not
reported a second time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from accelenv import __version__, records
from accelenv.errors import MatrixInvalidError, MatrixNotFoundError, UsageError
from accelenv.fileio import kind_of, read_bytes
from accelenv.matrix.model import (
    CiTier,
    DriverRelease,
    DriverRule,
    Environment,
    Family,
    Framework,
    FrameworkSource,
    Hold,
    ImageRef,
    Libraries,
    LiteralVersion,
    Matrix,
    Maturity,
    OsBase,
    Peak,
    Requirements,
    Requires,
    Runtime,
    Sku,
    Source,
)
from accelenv.matrix.problems import Problem, Severity, dotted
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Sequence

    from packaging.requirements import Requirement

    from accelenv.plugins import Plugin

MATRIX_ENV_VAR = "ACCELENV_MATRIX"
SECTIONS = ("sources", "os", "families", "skus", "drivers", "runtimes", "envs")
_DECLARES = re.compile(rb"^plugins[ \t]*=", re.MULTILINE)
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


@frozen
class Validation:
    """The outcome of reading a matrix: the model (None when the file could not be parsed) and all problems."""

    source: str
    matrix: Matrix | None
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return self.matrix is not None and not any(p.is_error for p in self.problems)


def find_matrix(explicit: str | None = None, start: Path | None = None) -> Path:
    """The matrix to use: the argument, else $ACCELENV_MATRIX, else matrix.toml here or in a parent folder."""
    given = explicit or os.environ.get(MATRIX_ENV_VAR)
    if given:
        path = Path(given)
        if not path.is_file():
            origin = "" if explicit else f" (from ${MATRIX_ENV_VAR})"
            what = "no such file" if not path.exists() else f"{kind_of(path.stat().st_mode)}, not a file"
            raise MatrixNotFoundError(f"{path}{origin}: {what}; pass the path of a matrix.toml")
        return path
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "matrix.toml"
        if candidate.is_file():
            return candidate
    raise MatrixNotFoundError(
        f"no matrix.toml in {here} or any parent folder; run from a checkout, or pass --matrix PATH "
        f"(or set ${MATRIX_ENV_VAR})"
    )


def validate_text(text: str, source: str = "matrix.toml", *, plugins: Sequence[Plugin] | None = None) -> Validation:
    """Parse, check against the schema, build the model and apply the rules. Never raises on bad input.
    The fragments of the plugins the matrix declares (`plugins = [...]`) are joined to the document first and
    validated with it; `plugins` is where to find them (default: the plugins installed here)."""
    import tomllib

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        position = _TOML_POSITION.search(message)
        line = int(position.group(1)) if position else None
        message = _TOML_POSITION.sub("", message).strip()
        problem = Problem(path="", message=f"not valid TOML: {message}", line=line, rule="toml")
        return Validation(source=source, matrix=None, problems=(problem,))
    except RecursionError:  # tomllib recurses per nesting level: `a = [[[[...` a few hundred deep
        problem = Problem(path="", message="not valid TOML: values nested too deeply to read", rule="toml")
        return Validation(source=source, matrix=None, problems=(problem,))
    from accelenv.matrix.locate import LineIndex
    from accelenv.matrix.rules import check_rules
    from accelenv.matrix.schema_check import schema_errors  # jsonschema: the slowest import; only validation

    lines = LineIndex(text)
    problems: list[Problem] = []
    broken: set[tuple[str, str]] = set()
    origin: dict[tuple[str, str], str] = {}
    if document.get("plugins"):
        from accelenv.matrix.fragments import joined_with_declared

        joined = joined_with_declared(document, plugins)
        document, origin = joined.document, joined.origin
        problems.extend(joined.problems)
    for parts, message, harmless in schema_errors(document):
        problems.append(Problem(path=dotted(parts), message=message, line=lines.line_of(parts), rule="schema"))
        if harmless:  # a repeated list item: the entry still reads the same, so the rules still see it
            continue
        if len(parts) >= 2 and parts[0] in SECTIONS:
            broken.add((str(parts[0]), str(parts[1])))
        elif len(parts) <= 1:
            broken.add((str(parts[0]) if parts else "", "*"))
    if any(entry == "*" for _, entry in broken):
        return Validation(source=source, matrix=None, problems=tuple(_attributed(problems, origin)))
    matrix, build_problems = _build(document, broken, source, check_requirements=True)
    problems.extend(build_problems)
    for finding in check_rules(matrix, skipped=frozenset(broken)):
        problems.append(
            Problem(
                path=dotted(finding.path),
                message=finding.message,
                severity=finding.severity,
                line=lines.line_of(finding.path),
                rule=finding.rule,
            )
        )
    problems = _attributed(problems, origin)
    problems.sort(key=lambda p: (p.line is None, p.line or 0, p.path))
    return Validation(source=source, matrix=matrix, problems=tuple(problems))


def _attributed(problems: list[Problem], origin: dict[tuple[str, str], str]) -> list[Problem]:
    if not origin:
        return problems
    from accelenv.matrix.fragments import attribute

    return attribute(problems, origin)


def validate_file(path: Path) -> Validation:
    try:
        data = read_bytes(path, what="matrix")
    except UsageError as error:  # cannot be read, not a regular file, or too large
        raise MatrixNotFoundError(str(error)) from error
    validation = _validate_bytes(data, str(path))
    from accelenv.matrix.fragments import unused_failures  # installed plugins that failed: named, never dropped

    failed = unused_failures(validation.problems)
    return records.replace(validation, problems=(*failed, *validation.problems)) if failed else validation


def _validate_bytes(data: bytes, source: str) -> Validation:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        problem = Problem(path="", message=f"not UTF-8 text ({error.reason} at byte {error.start})", rule="toml")
        return Validation(source=source, matrix=None, problems=(problem,))
    return validate_text(text, source=source)


def load_matrix(path: Path, *, use_cache: bool = True) -> Matrix:
    """The model of a valid matrix; raises `MatrixInvalidError` with every error when it is not valid.

    A matrix whose exact text this exact accelenv already validated is not validated again (see `_cache_key`):
    commands such as `check` then start in a fraction of the time, at about the cost of reading the file.
    `accelenv validate` never uses the cache."""
    data = None
    if use_cache and not os.environ.get("ACCELENV_NO_CACHE"):
        with contextlib.suppress(UsageError):  # validate_file below says what is wrong with it
            data = read_bytes(path, what="matrix")
    # the installed plugins' fragments are part of the cache key, looked up only for a matrix that declares some
    plugins = _installed() if data is not None and _DECLARES.search(data) else ()
    key = _cache_key(data + _fragments_bytes(plugins)) if data is not None else None
    cached = _cache_dir() / f"{key}.json" if key else None
    if cached is not None and data is not None:
        with contextlib.suppress(OSError, ValueError, MatrixInvalidError, KeyError, TypeError, UsageError):
            # the text, and the document it parsed to, as JSON: no TOML parser to import, no validation to repeat
            entry = json.loads(read_bytes(cached, what="matrix cache"))
            same = (
                entry["text"] == data.decode("utf-8") and entry.get("plugins", "") == _fragments_bytes(plugins).decode()
            )
            if same:  # the name is a checksum: the text (and the plugins' fragments) itself decides
                matrix, problems = _build(entry["document"], set(), str(path), check_requirements=False)
                if not problems:
                    return matrix
    validation = _validate_bytes(data, str(path)) if data is not None else validate_file(path)  # read once
    if not validation.ok or validation.matrix is None:
        raise MatrixInvalidError(validation.source, validation.problems)
    if cached is not None and data is not None:
        import tomllib

        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
            text = data.decode("utf-8")
            document = tomllib.loads(text)
            if document.get("plugins"):  # the joined document: its key covers the installed plugins' fragments
                from accelenv.matrix.fragments import joined_with_declared

                document = joined_with_declared(document, plugins).document
            entry = {"text": text, "document": document, "plugins": _fragments_bytes(plugins).decode()}
            _write_cache(cached, json.dumps(entry, separators=(",", ":")))
    return validation.matrix


def _write_cache(target: Path, text: str) -> None:
    """Atomically, so a concurrent reader sees the whole document or none (a cache that cannot be written is
    left out, never an error)."""
    from accelenv.errors import AccelenvError
    from accelenv.fileio import write_atomic

    with contextlib.suppress(AccelenvError):
        write_atomic(target, text)


def model_from_text(text: str, source: str = "matrix.toml") -> Matrix:
    """The model of a matrix text someone already validated (the cluster driver sends its matrix to the nodes):
    parse and build only, no schema, no rules."""
    import tomllib

    try:
        document = tomllib.loads(text)
        extra: list[Problem] = []
        if document.get("plugins"):  # a node joins its own installed plugins' fragments, as the driver did
            from accelenv.matrix.fragments import joined_with_declared

            joined = joined_with_declared(document, None)
            document, extra = joined.document, [p for p in joined.problems if p.is_error]
        matrix, problems = _build(document, set(), source, check_requirements=False)
        problems = [*extra, *problems]
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, RecursionError) as error:
        problem = Problem(path="", message=f"cannot be read: {error}", rule="toml")
        raise MatrixInvalidError(source, (problem,)) from error
    if problems:
        raise MatrixInvalidError(source, tuple(problems))
    return matrix


def read_matrix(path: Path) -> Matrix:
    """The model without schema and rules: for listing (nox -l) where jsonschema may not be installed. A matrix
    that does not even parse or build raises `MatrixInvalidError`; use `load_matrix` to trust the content."""
    try:
        text = read_bytes(path, what="matrix").decode("utf-8")
    except (UsageError, UnicodeDecodeError) as error:
        problem = Problem(path="", message=f"cannot be read: {error}", rule="toml")
        raise MatrixInvalidError(str(path), (problem,)) from error
    return model_from_text(text, str(path))


def _installed() -> tuple[Plugin, ...]:
    from accelenv.plugins import installed

    return installed().loaded


def _fragments_bytes(plugins: Sequence[Plugin]) -> bytes:
    return "".join(f"\0{p.package}\0{p.fragment}" for p in plugins).encode()


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "accelenv" / "validated"


def _cache_key(data: bytes) -> str | None:
    """The name of the cache entry of the matrix text `data`: the text's length and CRC-32, and a CRC-32 of
    accelenv's version with the size and mtime of the matrix core's source files (so an edited rule in a
    development checkout invalidates it). A name only: the entry holds the text it was made from, and `load_matrix`
    uses it only for that exact text, so a checksum does (a cryptographic hash would cost more to import than
    the rest of the lookup). None when a source file cannot be read."""
    import zlib

    stamp = [__version__]
    try:
        with os.scandir(Path(__file__).parent) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.endswith(".py"):
                    info = entry.stat()
                    stamp.append(f"{entry.name}:{info.st_size}:{info.st_mtime_ns}")
    except OSError:
        return None
    return f"{len(data)}-{zlib.crc32(data):08x}-{zlib.crc32(chr(0).join(stamp).encode()):08x}"


# ---------------------------------------------------------------------------------------------------------
# dict -> model. Entries reaching here passed the schema, so keys and types are known; versions and
# requirements are parsed with `packaging`, whose errors become problems too.


class _Builder:
    def __init__(self, source: str, *, check_requirements: bool) -> None:
        self.source = source
        self.problems: list[Problem] = []
        self.check_requirements = check_requirements  # parse them now (validation), or on first use

    def version(self, value: str | None, path: tuple[str, ...]) -> Version | None:
        if value is None:
            return None
        try:
            return LiteralVersion(value)
        except InvalidVersion:
            self.problems.append(
                Problem(path=dotted(path), message=f"{value!r} is not a version (expected e.g. 570.124.06)")
            )
            return None

    def requirement(self, value: str, path: tuple[str | int, ...]) -> Requirement | None:
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            return Requirement(value)
        except InvalidRequirement as error:
            self.problems.append(Problem(path=dotted(path), message=f"{value!r} is not a requirement: {error}"))
            return None


def _ray_types(value: object) -> dict[str, str]:
    """`ray_accelerator_type` as a mapping: a string names the type of every device of the SKU ("*"), a table
    names it per PCI device id (the schema has checked the shape)."""
    if isinstance(value, str):
        return {"*": value}
    if isinstance(value, dict):
        return {str(k).lower(): str(v) for k, v in value.items()}
    return {}


def _entries(document: dict[str, Any], section: str, broken: set[tuple[str, str]]) -> list[tuple[str, Any]]:
    table = document.get(section, {})
    return [(key, value) for key, value in table.items() if (section, key) not in broken]


def _build(
    document: dict[str, Any], broken: set[tuple[str, str]], source: str, *, check_requirements: bool
) -> tuple[Matrix, list[Problem]]:
    b = _Builder(source, check_requirements=check_requirements)
    sources = {
        key: Source(id=key, title=v["title"], url=v.get("url"), where=v.get("where"))
        for key, v in _entries(document, "sources", broken)
    }
    os_bases = {
        key: OsBase(
            id=key,
            name=v["name"],
            python=v.get("python"),
            glibc=v.get("glibc"),
            package_manager=v["package_manager"],
            sources=tuple(v.get("sources", ())),
        )
        for key, v in _entries(document, "os", broken)
    }
    families = {
        key: Family(
            id=key,
            name=v["name"],
            maturity=Maturity(v["maturity"]),
            session=v["session"],
            runtime_kind=v["runtime_kind"],
            pci_vendor_ids=tuple(v.get("pci_vendor_ids", ())),
            visible_devices_env=tuple(v.get("visible_devices_env", ())),
            host_tools=tuple(v.get("host_tools", ())),
            kernel_modules=tuple(v.get("kernel_modules", ())),
            device_nodes=tuple(v.get("device_nodes", ())),
            arch_pattern=v["arch_pattern"],
            wheel_tag_format=v.get("wheel_tag_format"),
            container_env=MappingProxyType(dict(v.get("container_env", {}))),
            container_devices=tuple(v.get("container_devices", ())),
            container_groups=tuple(v.get("container_groups", ())),
            container_gpus=bool(v.get("container_gpus", False)),
            container_runtime=v.get("container_runtime"),
            container_shm_size=v.get("container_shm_size"),
            container_ipc=v.get("container_ipc"),
            container_cdi_kind=v.get("container_cdi_kind"),
            container_cdi_generate=v.get("container_cdi_generate"),
            ci_runner=tuple(v.get("ci_runner", ("ubuntu-latest",))),
            ci_queue=v.get("ci_queue"),
            ci_tier=CiTier(v.get("ci_tier", "pr")),
            ci_platforms=MappingProxyType(
                {
                    platform: (tuple(entry["runner"]), entry.get("queue"))
                    for platform, entry in sorted(v.get("ci_platforms", {}).items())
                }
            ),
            no_sku_driver_min=v.get("no_sku_driver_min", ""),
            newer_drivers=v.get("newer_drivers", "run-older-runtimes"),
            collective_backend=v.get("collective_backend"),
            owners=tuple(v.get("owners", ())),
            ray_resource=v.get("ray_resource"),
            ray_visible_devices_env=v.get("ray_visible_devices_env"),
            sources=tuple(v.get("sources", ())),
        )
        for key, v in _entries(document, "families", broken)
    }
    skus = {
        key: Sku(
            id=key,
            family=v["family"],
            name=v["name"],
            arch=v["arch"],
            product_names=tuple(v.get("product_names", ())),
            pci_device_ids=tuple(v.get("pci_device_ids", ())),
            memory_mib=v.get("memory_mib"),
            host_arch=tuple(v.get("host_arch", ("x86_64",))),
            driver_min=b.version(v.get("driver_min"), ("skus", key, "driver_min")),
            no_driver_min=v.get("no_driver_min", ""),
            ray_accelerator_type=_ray_types(v.get("ray_accelerator_type")),
            no_ray_accelerator_type=v.get("no_ray_accelerator_type", ""),
            owners=tuple(v.get("owners", ())),
            sources=tuple(v.get("sources", ())),
            notes=v.get("notes", ""),
            peak=_peak(v.get("peak")),
        )
        for key, v in _entries(document, "skus", broken)
    }
    drivers = {
        key: DriverRelease(
            id=key,
            family=v["family"],
            release=v["release"],
            reports=v["reports"],
            sources=tuple(v.get("sources", ())),
            notes=v.get("notes", ""),
        )
        for key, v in _entries(document, "drivers", broken)
    }
    runtimes = {key: _runtime(b, key, v) for key, v in _entries(document, "runtimes", broken)}
    envs = {key: _env(b, key, v) for key, v in _entries(document, "envs", broken)}
    matrix = Matrix(
        schema_version=document["schema_version"],
        sources=MappingProxyType(sources),
        os=MappingProxyType(os_bases),
        families=MappingProxyType(families),
        skus=MappingProxyType(skus),
        runtimes=MappingProxyType(runtimes),
        envs=MappingProxyType(envs),
        drivers=MappingProxyType(drivers),
        path=source,
    )
    return matrix, b.problems


def _runtime(b: _Builder, key: str, v: dict[str, Any]) -> Runtime:
    path = ("runtimes", key)
    driver = v.get("driver", {})
    return Runtime(
        id=key,
        family=v["family"],
        name=v["name"],
        version=b.version(v.get("version"), (*path, "version")),
        wheel_tag=v.get("wheel_tag"),
        components=MappingProxyType(dict(v.get("components", {}))),
        architectures=tuple(v["architectures"]),
        driver=DriverRule(
            min=b.version(driver.get("min"), (*path, "driver", "min")),
            compat_min=b.version(driver.get("compat_min"), (*path, "driver", "compat_min")),
            max=b.version(driver.get("max"), (*path, "driver", "max")),
            accepted=tuple(driver.get("accepted", ())),
            releases=tuple(driver.get("releases", ())),
            notes=driver.get("notes", ""),
        ),
        base_images=MappingProxyType(
            {
                os_label: ImageRef(
                    repository=i["repository"], tag=i["tag"], digest=i.get("digest"), python=i.get("python")
                )
                for os_label, i in v["base_images"].items()
            }
        ),
        hold=Hold(reason=v["hold"]["reason"], packages=tuple(v["hold"].get("packages", ()))) if "hold" in v else None,
        libraries=_libraries(v["libraries"]) if "libraries" in v else None,
        sources=tuple(v.get("sources", ())),
        notes=v.get("notes", ""),
    )


def _libraries(v: dict[str, Any]) -> Libraries:
    return Libraries(base=tuple(v["base"]), wheels=tuple(v.get("wheels", ())), notes=v.get("notes", ""))


def _env(b: _Builder, key: str, v: dict[str, Any]) -> Environment:
    req = v["requirements"]
    specs = [
        p
        for i, p in enumerate(req["packages"])
        if not b.check_requirements or b.requirement(p, ("envs", key, "requirements", "packages", i)) is not None
    ]
    return Environment(
        id=key,
        family=v["family"],
        runtime=v["runtime"],
        description=v["description"],
        default=v.get("default", False),
        os=v["os"],
        python=v["python"],
        platforms=tuple(v["platforms"]),
        skus=tuple(v.get("skus", ())),
        requirements=Requirements(
            specs=tuple(specs),
            index_url=req.get("index_url"),
            extra_index_urls=tuple(req.get("extra_index_urls", ())),
        ),
        tests=tuple(v["tests"]),
        ci_tier=CiTier(v["ci_tier"]),
        ci_runner=tuple(v.get("ci_runner", ())),
        ci_queue=v.get("ci_queue"),
        requires=Requires(**v.get("requires", {})),
        sources=tuple(v.get("sources", ())),
        framework=_framework(v["framework"]) if "framework" in v else None,
        perf_min_fraction=v.get("perf_min_fraction"),
        ci_unschedulable=v.get("ci_unschedulable"),
        owners=tuple(v.get("owners", ())),
        transports=tuple(v.get("transports", ())),
        no_transports=v.get("no_transports"),
    )


def _peak(v: dict[str, Any] | None) -> Peak | None:
    if v is None:
        return None
    return Peak(
        precision=v["precision"],
        matmul_tflops=v.get("matmul_tflops"),
        memory_gb_s=v.get("memory_gb_s"),
        source=v["source"],
        notes=v.get("notes", ""),
        interconnect_gb_s=v.get("interconnect_gb_s"),
    )


def _framework(v: dict[str, Any]) -> Framework:
    return Framework(name=v["name"], version=v["version"], build=v.get("build"), source=FrameworkSource(v["source"]))


__all__ = ["Severity", "Validation", "find_matrix", "load_matrix", "read_matrix", "validate_file", "validate_text"]
