"""Result records: the model, and reading them back as the untrusted input they are.

A record file is read with a size bound, parsed, validated against schema/result.schema.json, then against the
matrix (the environment and SKU must exist and belong together) and the clock (it cannot end in the future, nor
before it started), and against itself: an outcome its tests, check verdict or device count contradict is
refused (see `contradiction`). Anything else is refused with the file named and the reason; a refused record is
never used as evidence, and its content is never echoed except as escaped text by the page. A figure's peak and
fraction of peak are the matrix's, computed here: the record's own numbers are never shown.
"""

from __future__ import annotations

import json
import stat
import time
from typing import TYPE_CHECKING, Any

from accelenv.errors import UsageError
from accelenv.fileio import files_under, read_bytes
from accelenv.records import frozen
from accelenv.results.schema import FORMAT, result_schema

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from accelenv.matrix.model import Matrix

PEAK_OF = {"matmul": "matmul_tflops", "memory_bandwidth": "memory_gb_s"}  # figures with a datasheet peak
MAX_RECORD = 4 * 2**20  # a record with 10,000 tests is under 2 MiB
MAX_FILES = 10000
MAX_TOTAL = 512 * 2**20  # all the records one command reads: a year of nightly runs of every environment is less
CLOCK_SKEW = 300  # seconds a record's end may lie ahead of this machine's clock
SUFFIX = ".result.json"


@frozen
class Figure:
    name: str
    value: float
    unit: str
    dtype: str
    devices: int
    samples: int
    peak: float | None
    fraction: float | None
    min_fraction: float | None
    warning: str | None
    spread: float | None = None  # (max - min) / median over the repetitions, when the record gives it


@frozen
class Test:
    id: str
    outcome: str
    reason: str | None
    defect: str | None  # "https://github.com/...: what" for a failure with a named upstream cause


@frozen
class Record:
    """One validated record. `data` is the document as read (already schema-valid)."""

    path: str
    id: str
    env: str
    lock_sha256: str | None
    family: str
    sku: str | None
    device_count: int
    driver: str | None
    nodes: int
    verdict: str
    outcome: str  # passed, failed, not_proven, incomplete (an older record's "inconclusive" reads as not_proven)
    runner: str | None  # the CI runner / agent / host it ran on
    note: str | None
    tests: tuple[Test, ...]
    started: int  # seconds since 1970, UTC
    finished: int
    run_url: str | None
    perf: tuple[Figure, ...]
    frameworks_differ: tuple[str, ...]  # "torch 2.13.0+cpu (pin: none)" for each framework not at the pin
    data: dict[str, Any]


@frozen
class Refused:
    """A file that is not a usable record, and why."""

    path: str
    reason: str


def parse_time(text: str) -> int | None:
    """Seconds since 1970 of a record's `2026-12-01T21:00:00Z`, or None."""
    from accelenv.timestamps import rfc3339_seconds

    return rfc3339_seconds(text)


def format_time(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


_VALIDATORS: list[Any] = []  # built once: (the fast check, the strict validator for the message)


def _whole_patterns(node: Any) -> Any:
    """The schema with each `pattern` wrapped to match the whole string, as the strict validator reads it
    (fastjsonschema runs `re.search`, and already reads `$` as the end of the string)."""
    if isinstance(node, dict):
        return {
            k: (f"^(?:{v})$" if k == "pattern" and isinstance(v, str) else _whole_patterns(v)) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_whole_patterns(v) for v in node]
    return node


def _validators() -> tuple[Any, Any]:
    """fastjsonschema's compiled check of the schema (0.23 ms a record against jsonschema's 3.6, which made
    10,000 records a minute: benchmarks/results_scale.py), and the strict jsonschema validator (patterns match
    whole strings: schema_check.strict_validator), which says what is wrong. The schema uses only draft-07
    keywords, so both read it the same; where fastjsonschema is not installed (an image), jsonschema does both."""
    if not _VALIDATORS:
        from accelenv.matrix.schema_check import strict_validator

        schema = result_schema()
        full = strict_validator(schema)
        try:
            import fastjsonschema
        except ImportError:
            fast = None
        else:
            draft7 = {**_whole_patterns(schema), "$schema": "http://json-schema.org/draft-07/schema#"}
            fast = fastjsonschema.compile(draft7)
        _VALIDATORS.append((fast, full))
    found: tuple[Any, Any] = _VALIDATORS[0]
    return found


def _schema_problem(data: object) -> str | None:
    fast, validator = _validators()
    fast_says = None
    if fast is not None:
        from fastjsonschema import JsonSchemaValueException

        try:
            fast(data)
        except JsonSchemaValueException as error:
            fast_says = str(error)[:200]
        else:
            return None
    elif validator.is_valid(data):
        return None
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:  # the two disagree: refuse, as the stricter one says
        return fast_says
    first = errors[0]
    where = ".".join(str(p) for p in first.absolute_path) or "(top level)"
    message = first.message if len(first.message) <= 200 else first.message[:200] + "..."
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}"


def check_record(data: object, matrix: Matrix, *, now: float) -> str | None:
    """Why `data` is not a usable record for this matrix, or None when it is."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("format") != FORMAT:
        return f"format is {str(data.get('format'))[:60]!r}, not {FORMAT!r}: not an accelenv result record"
    problem = _schema_problem(data)
    if problem:
        return f"does not match schema/result.schema.json: {problem}"
    env_id, sku, family = data["env"]["id"], data["host"]["sku"], data["host"]["family"]
    env = matrix.envs.get(env_id)
    if env is None:
        return f"env.id '{env_id}' is not an environment of the matrix"
    if family != env.family:
        return f"host.family '{family}' is not {env_id}'s family '{env.family}'"
    if sku is not None and sku not in matrix.skus:
        return f"host.sku '{sku}' is not a SKU of the matrix"
    if sku is not None and matrix.skus[sku].family != env.family:
        return f"host.sku '{sku}' is a {matrix.skus[sku].family} SKU, not {env.family}"
    started, finished = parse_time(data["started"]), parse_time(data["finished"])
    if started is None or finished is None:
        return "started/finished is not a valid time"
    if finished < started:
        return f"finished {data['finished']} is before started {data['started']}"
    if finished > now + CLOCK_SKEW:
        return f"finished {data['finished']} is in the future (this machine's clock: {format_time(now)})"
    if not data["id"].startswith(env_id + "-"):
        return f"id '{data['id']}' does not start with its environment '{env_id}'"
    return contradiction(data, family) or _peak_problem(data, matrix)


def contradiction(data: dict[str, Any], family: str) -> str | None:
    """Why a schema-valid record's outcome is not what its own tests, check verdict and device count say."""
    outcome, host = data["outcome"], data["host"]
    count, verdict = host["device_count"], data["check"]["verdict"]
    kinds = [t["outcome"] for t in data["tests"]]
    bad = [t["id"] for t in data["tests"] if t["outcome"] in ("failed", "error", "incomplete")]
    for t in data["tests"]:
        if t.get("defect") is not None and t["outcome"] not in ("failed", "error"):
            return f"test {t['id']} names a known defect but {t['outcome']}: a defect names a failure"
    if outcome == "passed":
        if bad:
            return f"outcome passed, but test {bad[0]} did not pass"
        if "passed" not in kinds:
            return "outcome passed, but no test passed"
        if verdict == "fail":
            return "outcome passed, but the check verdict is fail"
        if family != "cpu" and count == 0:
            return "outcome passed, but host.device_count is 0: no device was there to prove anything"
        if family != "cpu" and host["sku"] is None:
            return "outcome passed, but host.sku is null: the devices were not identified"
    if outcome in ("not_proven", "inconclusive"):
        if bad:
            return f"outcome {outcome}, but test {bad[0]} did not pass: that is a failure"
        if count > 0 and family != "cpu":
            return f"outcome {outcome}, but host.device_count is {count}: the hardware was there"
    if outcome == "failed" and not bad and verdict != "fail" and "passed" in kinds:
        return "outcome failed, but no test failed and the check did not fail"
    for figure in data["perf"]:
        if family != "cpu" and figure["devices"] > max(count, 1) * host["nodes"]:
            return (
                f"figure {figure['name']} ran on {figure['devices']} device(s), more than the "
                f"{count} x {host['nodes']} node(s) the host had"
            )
    return None


def _peak_problem(data: dict[str, Any], matrix: Matrix) -> str | None:
    """A recorded peak that is not the matrix's (nor a device's share of it: a TPU7x chip is two devices)."""
    sku = matrix.skus.get(data["host"]["sku"] or "")
    for figure in data["perf"]:
        peak = matrix_peak(matrix, data["host"]["sku"], figure["name"])
        recorded = figure["peak"]
        if recorded is None or peak is None:
            continue
        if not any(abs(recorded * k - peak) <= 1e-6 * peak for k in range(1, 9)):
            return (
                f"figure {figure['name']}: peak {recorded:g} is not {sku.id if sku else '?'}'s {peak:g} in the matrix"
            )
    return None


def matrix_peak(matrix: Matrix, sku_id: str | None, figure: str) -> float | None:
    """The SKU's documented peak for a figure, from the matrix."""
    sku = matrix.skus.get(sku_id or "")
    attribute = PEAK_OF.get(figure)
    if sku is None or sku.peak is None or attribute is None:
        return None
    value: float | None = getattr(sku.peak, attribute)
    return value


def _figure(figure: dict[str, Any], matrix: Matrix, sku: str | None, min_fraction: float | None) -> Figure:
    """A recorded figure with the matrix's peak (times the device's share the record's peak shows) and fraction."""
    peak = matrix_peak(matrix, sku, figure["name"])
    if peak is not None and figure["peak"]:
        peak = peak / round(peak / figure["peak"])  # check_record: the recorded peak is peak / k
    fraction = figure["value"] / peak if peak else None
    warning = None
    if fraction is not None and min_fraction is not None and fraction < min_fraction:
        warning = (
            f"{figure['value']:.1f} {figure['unit']} is {fraction:.0%} of the {peak:g} peak, below {min_fraction:.0%}"
        )
    elif peak is None and figure["name"] in PEAK_OF and sku is not None:
        warning = f"{sku} has no documented {figure['name']} peak in the matrix"
    return Figure(
        name=figure["name"],
        value=figure["value"],
        unit=figure["unit"],
        dtype=figure["dtype"],
        devices=figure["devices"],
        samples=figure["samples"],
        peak=peak,
        fraction=fraction,
        min_fraction=min_fraction,
        warning=warning,
        spread=figure.get("spread"),
    )


def _defect(test: dict[str, Any]) -> str | None:
    defect = test.get("defect")
    if not defect:
        return None
    return ": ".join(p for p in (defect.get("url"), defect.get("description")) if p)


def record_of(data: dict[str, Any], path: str, matrix: Matrix) -> Record:
    """The model of a document `check_record` accepted."""
    env = matrix.envs[data["env"]["id"]]
    perf = tuple(_figure(figure, matrix, data["host"]["sku"], env.perf_min_fraction) for figure in data["perf"])
    differ = tuple(
        f"{f['name']} {f['version'] or 'not installed'} (pin: {f['pinned'] or 'none'})"
        for f in data["env"]["frameworks"]
        if not f["matches_pin"]
    )
    started, finished = parse_time(data["started"]) or 0, parse_time(data["finished"]) or 0  # check_record read both
    return Record(
        path=path,
        id=data["id"],
        env=data["env"]["id"],
        lock_sha256=data["env"]["lock_sha256"],
        family=data["host"]["family"],
        sku=data["host"]["sku"],
        device_count=data["host"]["device_count"],
        driver=data["host"]["driver"],
        nodes=data["host"]["nodes"],
        verdict=data["check"]["verdict"],
        outcome="not_proven" if data["outcome"] == "inconclusive" else data["outcome"],
        runner=data.get("runner"),
        note=data.get("note"),
        tests=tuple(
            Test(id=t["id"], outcome=t["outcome"], reason=t["reason"], defect=_defect(t)) for t in data["tests"]
        ),
        started=started,
        finished=finished,
        run_url=data.get("run_url"),
        perf=perf,
        frameworks_differ=differ,
        data=data,
    )


class _NotANumber(ValueError):
    pass


def _no_constant(name: str) -> object:
    raise _NotANumber(name)


def read_record(path: Path, matrix: Matrix, *, now: float | None = None) -> Record | Refused:
    """The record in `path`, or why it is refused."""
    try:
        raw = read_bytes(path, limit=MAX_RECORD, what="result record")
    except UsageError as error:
        return Refused(path=str(path), reason=str(error).removeprefix(f"{path}: "))
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as error:
        return Refused(path=str(path), reason=f"not UTF-8 ({error.reason} at byte {error.start})")
    except json.JSONDecodeError as error:
        return Refused(path=str(path), reason=f"not JSON (truncated?): {error.msg} at line {error.lineno}")
    except RecursionError:
        return Refused(path=str(path), reason="not JSON: nested too deeply")
    except _NotANumber as error:
        return Refused(path=str(path), reason=f"not JSON: {error} is no number JSON allows (a figure must be finite)")
    reason = check_record(data, matrix, now=time.time() if now is None else now)
    if reason is not None:
        return Refused(path=str(path), reason=reason)
    return record_of(data, str(path), matrix)


def record_files(paths: Iterable[Path]) -> list[Path]:
    """The record files named: a file as given, a folder searched (recursively: CI artifacts nest) for
    `*.result.json`. Symlinked folders are not followed; at most MAX_FILES."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            found += files_under(path, SUFFIX, limit=MAX_FILES)  # no recursion: a 1,100-deep folder is refused
        elif path.exists() or path.is_symlink():
            found.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder of result records")
        if len(found) > MAX_FILES:
            raise UsageError(f"more than {MAX_FILES} record files under {path}; name fewer folders")
    return found


def read_records(
    paths: Iterable[Path], matrix: Matrix, *, now: float | None = None
) -> tuple[list[Record], list[Refused]]:
    """Every record under `paths`, merged: the same id twice with the same content counts once; with other
    content, the later file is refused (two runs cannot share an id)."""
    records: dict[str, Record] = {}
    refused: list[Refused] = []
    total = 0
    for path in record_files(paths):
        total += _size_on_disk(path)
        if total > MAX_TOTAL:  # records are kept whole: the sum is bounded, not only each file
            raise UsageError(f"the records named hold more than {MAX_TOTAL // 2**20} MiB in all; name fewer folders")
        got = read_record(path, matrix, now=now)
        if isinstance(got, Refused):
            refused.append(got)
            continue
        seen = records.get(got.id)
        if seen is None:
            records[got.id] = got
        elif seen.data != got.data:
            refused.append(Refused(path=got.path, reason=f"id {got.id} is also in {seen.path} with other content"))
    return sorted(records.values(), key=lambda r: (r.started, r.id)), refused


def _size_on_disk(path: Path) -> int:
    """The size of the regular file `path` (0 for anything else: `read_record` refuses it unread)."""
    try:
        info = path.lstat()
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0
