"""The pytest plugin that writes a result record for a run of an environment's device suite.

Loaded with `-p accelenv.results.plugin` (the environment sessions pass it). Active only when ACCELENV_ENV names
an environment. Before the tests it takes a snapshot of the host (saved beside the record), runs `check` against
it and *begins* the record (`<id>.result.json`, outcome incomplete); it collects every test's outcome and the
performance figures the conformance tests hand it (`figures(config).append(...)`), and when the run ends it
*completes* the record and writes `<id>.junit.xml` beside it, in $ACCELENV_RESULTS or ./results. A run that dies
leaves the begun record (incomplete), never silence; a run cancelled by Ctrl-C or `pytest.exit()` is completed as
incomplete, and the test it interrupted as incomplete, never passed; a test file that did not import is an error.
A record that cannot be written fails the run: no silent pass.

A failure with a known upstream cause stays a failure, with its cause named in the record: mark the test
`@pytest.mark.accelenv_upstream_defect(url="https://github.com/...", description="...")`, or call
`upstream_defect(request, url=..., description=...)` from it before the part that fails. The cause is kept
only when the test fails or errors.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import stat
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from accelenv.redact import redact_text
from accelenv.results.record import SUFFIX, check_record, format_time
from accelenv.results.schema import FORMAT

if TYPE_CHECKING:
    from accelenv.host.report import HostReport
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.results.record import Figure

RESULTS_ENV = "ACCELENV_RESULTS"
NO_DEVICE = "no device here"  # how every skip for missing hardware begins (tests/support/devicekit.py)
RUNNER_VARIABLES = ("RUNNER_NAME", "BUILDKITE_AGENT_NAME")  # GitHub Actions, Buildkite; else the host name
DEFECT_MARKER = "accelenv_upstream_defect"
FRAMEWORKS = ("torch", "jax", "ray")  # recorded even when the environment pins none of them


@dataclass
class Run:
    matrix: Matrix
    env: Environment
    folder: Path
    id: str
    started: float
    report: HostReport | None = None
    verdict: str = "fail"
    failed_checks: list[str] = field(default_factory=list)
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    nodes: int = 1
    defects: dict[str, dict[str, str | None]] = field(default_factory=dict)  # test id -> {url, description}
    interrupted: str | None = None  # why the run was cut short (Ctrl-C, pytest.exit)
    no_device: int = 0  # tests skipped for want of a device, as asked


RUN_KEY = pytest.StashKey[Run]()
_RUNS: list[Run] = []  # the run of this process: pytest_runtest_logreport is given no config


def current_run(config: pytest.Config) -> Run | None:
    """The run this plugin records, or None when it is not loaded or not active."""
    return config.stash.get(RUN_KEY, None)


def _repo() -> Path:
    return Path(__file__).resolve().parents[3]


def upstream_defect(request: pytest.FixtureRequest, *, url: str | None, description: str) -> None:
    """Name the known upstream defect the calling test may fail on (kept in the record only if it fails)."""
    run = current_run(request.config)
    if run is not None:
        run.defects[request.node.nodeid] = _defect(url, description)


def _defect(url: object, description: object) -> dict[str, str | None]:
    link = str(url) if url else None
    if link is not None and not (link.startswith("https://") and link.isprintable() and " " not in link):
        raise pytest.UsageError(f"{DEFECT_MARKER}: url {link[:100]!r} is not an https URL")
    text = _line(str(description or ""))
    if not text:
        raise pytest.UsageError(f"{DEFECT_MARKER}: give a description of the defect (and its url where one is filed)")
    return {"url": link, "description": text}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{DEFECT_MARKER}(url=None, description=...): the test fails because of this known upstream defect; "
        "the failure stays a failure, with its cause named in the result record",
    )
    env_id = os.environ.get("ACCELENV_ENV")
    if not env_id or hasattr(config, "workerinput"):
        return
    from accelenv.matrix import find_matrix, load_matrix

    matrix = load_matrix(find_matrix(None, start=Path(str(config.rootpath))))
    if env_id not in matrix.envs:
        raise pytest.UsageError(f"ACCELENV_ENV={env_id!r} is not an environment of {matrix.path}")
    folder = results_folder(Path(str(config.rootpath)), os.environ.get(RESULTS_ENV))
    started = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    run = Run(
        matrix=matrix,
        env=matrix.envs[env_id],
        folder=folder,
        id=f"{env_id}-{stamp}-{secrets.token_hex(4)}",
        started=started,
    )
    config.stash[RUN_KEY] = run
    _RUNS.append(run)
    if not config.option.xmlpath:  # JUnit XML beside the record, for CI viewers
        config.option.xmlpath = str(folder / f"{run.id}.junit.xml")


def results_folder(root: Path, named: str | None) -> Path:
    """The folder the records go to: $ACCELENV_RESULTS, or `results` under the rootdir, which must be a real
    folder there (never a symlink the checkout holds). Anything that cannot take the records (a file, a FIFO, a
    read-only folder) is a usage error before any test runs, not an INTERNALERROR after them all."""
    folder = Path(named) if named else root / "results"
    where = f"{RESULTS_ENV}={named}" if named else str(folder)
    if not named and folder.is_symlink():
        raise pytest.UsageError(
            f"{folder}: is a symlink; result records are written only into a real folder: replace the link with a "
            f"folder, or set {RESULTS_ENV} to the folder you mean"
        )
    from accelenv.fileio import kind_of

    try:
        if not folder.is_dir():
            folder.mkdir(parents=True)
        info = folder.stat()
    except OSError as error:
        if isinstance(error, FileExistsError):
            info = folder.stat()
        else:
            raise pytest.UsageError(f"{where}: cannot make the results folder: {error.strerror or error}") from error
    if not stat.S_ISDIR(info.st_mode):
        raise pytest.UsageError(f"{where}: is {kind_of(info.st_mode)}, not a folder for result records")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{where}: the results folder cannot be written by this user; name another")
    return folder.resolve()


def pytest_sessionstart(session: pytest.Session) -> None:
    run = current_run(session.config)
    if run is None:
        return
    from accelenv.check.checks import check
    from accelenv.check.verdict import Status, verdict
    from accelenv.host.discover import discover
    from accelenv.host.root import Root
    from accelenv.host.run import ToolRunner
    from accelenv.host.snapshot import save_snapshot

    run.report = discover(
        run.matrix, root=Root.from_option(None), runner=ToolRunner(), environ=os.environ, families=[run.env.family]
    )
    save_snapshot(run.report, run.folder / f"{run.id}.snapshot.json", inside=run.folder)
    findings = check(run.matrix, run.env, run.report)
    run.verdict = str(verdict(findings))
    run.failed_checks = [f.id for f in findings if f.status is Status.FAIL]
    _write(run, {**build_record(run, finished=run.started), "outcome": "incomplete", "note": BEGUN})


BEGUN = "the run began and never completed: it died or was killed before its end (no later record replaced this one)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run = current_run(config)
    if run is None:
        return
    for item in items:
        marker = item.get_closest_marker(DEFECT_MARKER)
        if marker is not None:
            run.defects[item.nodeid] = _defect(marker.kwargs.get("url"), marker.kwargs.get("description"))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    run = _RUNS[-1] if _RUNS else None
    if run is None or not report.failed:
        return
    reason = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "could not be collected"
    node = report.nodeid or "(collection)"
    run.tests[node] = {"id": node, "outcome": "error", "reason": _line(reason), "seconds": 0}


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    run = _RUNS[-1] if _RUNS else None
    if (
        excinfo.typename == "Interrupted"
        and run is not None
        and any(t["outcome"] == "error" for t in run.tests.values())
    ):
        return  # pytest stops after a test file did not import: that file's error fails the run
    if run is not None:
        kind = "pytest.exit()" if excinfo.typename == "Exit" else excinfo.typename
        run.interrupted = _line(f"the run was cut short ({kind}: {excinfo.value}) before it completed")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    run = _RUNS[-1] if _RUNS else None
    if run is None:
        return
    _redact_report(report)  # first: the JUnit XML and the terminal report see only the redacted text
    # incomplete until its call phase passes: a test cut short (Ctrl-C) never reads as passed
    entry = run.tests.setdefault(
        report.nodeid, {"id": _test_id(report.nodeid), "outcome": "incomplete", "reason": None, "seconds": 0}
    )
    if report.when == "call":
        entry["seconds"] = round(report.duration, 6)
    if report.skipped:
        entry["outcome"] = "skipped"
        longrepr = report.longrepr
        entry["reason"] = _line(longrepr[2] if isinstance(longrepr, tuple) else str(longrepr))
        if entry["reason"].removeprefix("Skipped: ").startswith(NO_DEVICE):
            run.no_device += 1
    elif report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["reason"] = _line(str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "failed")
        if report.nodeid in run.defects:
            entry["defect"] = run.defects[report.nodeid]
        elif (named := _named_defect(str(report.longrepr) if report.longrepr else "")) is not None:
            entry["defect"] = named
    elif report.when == "call" and entry["outcome"] == "incomplete":
        entry["outcome"] = "passed"


def _named_defect(failure: str) -> dict[str, str | None] | None:
    """The defect a failure names in its own words (`known upstream defect: ray-project/ray#66264: ...`, the line
    results.transports.defect_message writes), as the record's `defect`: a test that knows its cause only when it
    fails (the RDT suite) names it there, and the record carries it as a marked test's would."""
    from accelenv.results.transports import KNOWN_DEFECT, defect_of

    for raw in failure.splitlines():
        line = raw.strip().removeprefix("E ").strip().removeprefix("Failed: ")
        found = defect_of(line) if line.startswith(KNOWN_DEFECT) else None
        if found is not None:
            reference, description = found
            repo, hash_, number = reference.partition("#")
            url = f"https://github.com/{repo}/issues/{number}" if hash_ and "/" in repo else None
            return _defect(url, f"{reference}: {description}")
    return None


def _line(text: str) -> str:
    first = next((line for line in text.splitlines() if line.strip()), "")
    clean = "".join(ch if ch.isprintable() else " " for ch in redact_text(first))
    return clean[:500]


MAX_TEST_ID = 500  # the record schema's bound on a test id


def _test_id(nodeid: str) -> str:
    """`nodeid` as the record holds it: printable, and at most MAX_TEST_ID characters (a longer one keeps its
    start and a digest of the whole, so two long ids stay apart)."""
    import hashlib

    clean = "".join(ch if ch.isprintable() else " " for ch in redact_text(nodeid))
    if len(clean) <= MAX_TEST_ID:
        return clean
    digest = hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{clean[: MAX_TEST_ID - 20]}...-{digest}"


def _redact_report(report: pytest.TestReport) -> None:
    """Secrets out of what pytest writes about a test (its id, its failure or skip text, its captured output): a
    token in a parametrized id, an assertion message or a skip reason must reach neither the record nor the JUnit
    XML (which names a test by its nodeid) nor the terminal (which shows its location's name)."""
    clean_id = redact_text(report.nodeid)
    if clean_id != report.nodeid:
        report.nodeid = clean_id
        path, line, name = report.location
        report.location = (path, line, redact_text(name))
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        report.longrepr = (longrepr[0], longrepr[1], redact_text(str(longrepr[2])))
    elif longrepr is not None and not isinstance(longrepr, tuple):
        text = str(longrepr)
        clean = redact_text(text)
        if clean != text:
            report.longrepr = clean
    report.sections = [(name, redact_text(content)) for name, content in report.sections]
    if hasattr(report, "wasxfail"):
        report.wasxfail = redact_text(str(report.wasxfail))


def _frameworks(env: Environment) -> list[dict[str, Any]]:
    from accelenv.matrix.model import canonical_name

    pins = {canonical_name(name): version for name, version in env.requirements.pins}
    names = list(dict.fromkeys([*pins, *FRAMEWORKS]))
    out = []
    for name in names:
        try:
            version: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = None
        pinned = pins.get(name)
        if version is None and pinned is None:
            continue
        out.append(
            {
                "name": name,
                "version": version,
                "pinned": f"=={pinned}" if pinned else None,
                "matches_pin": pinned is not None and version == pinned,
            }
        )
    return out


def _lock_sha256(env: Environment) -> str | None:
    import hashlib

    from accelenv.matrix.paths import lock_path

    path = lock_path(_repo(), env.id)
    from accelenv.fileio import read_bytes

    return hashlib.sha256(read_bytes(path, what="lock file")).hexdigest() if path.is_file() else None


def host_sku(matrix: Matrix, env: Environment, report: HostReport | None) -> str | None:
    """The SKU the host snapshot identified for the family's devices (when they are all one SKU); for the CPU
    family, the environment's SKU of this machine's architecture."""
    acc = report.accelerator(env.family) if report else None
    if acc is not None:
        found = {d.sku for d in acc.devices if d.sku}
        return found.pop() if len(found) == 1 else None
    if env.family == "cpu":
        machine = platform.machine().lower()
        return next((s.id for s in matrix.env_skus(env) if s.arch == machine), None)
    return None


def _host(run: Run) -> dict[str, Any]:
    family = run.env.family
    acc = run.report.accelerator(family) if run.report else None
    count = len(acc.devices) if acc else 0
    return {
        "family": family,
        "sku": host_sku(run.matrix, run.env, run.report),
        "device_count": count,
        "driver": acc.driver_version if acc else None,
        "nodes": run.nodes,
    }


def runner_name(environ: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """The CI runner or agent the run is on (RUNNER_NAME, BUILDKITE_AGENT_NAME), else the host name; redacted,
    printable, at most 200 characters."""
    import socket

    from accelenv.redact import redact_text

    name = next((environ[v] for v in RUNNER_VARIABLES if environ.get(v)), None) or socket.gethostname()
    clean = "".join(ch for ch in redact_text(name) if ch.isprintable()).strip()[:200]
    return clean or None


def _run_url() -> str | None:
    from accelenv.host.run_url import run_url  # GitHub's run, Buildkite's job, or what `accelenv run` passed in

    return run_url(os.environ)


def outcome_of(run: Run, host: dict[str, Any]) -> tuple[str, str | None]:
    """The record's outcome and the note that says why, from the tests, the check and the devices seen."""
    tests = list(run.tests.values())
    bad = [t for t in tests if t["outcome"] in ("failed", "error", "incomplete")]
    passed = sum(1 for t in tests if t["outcome"] == "passed")
    if run.interrupted:
        return "incomplete", run.interrupted
    if bad:
        errors = sum(1 for t in bad if t["outcome"] == "error")
        named = sum(1 for t in bad if t.get("defect"))
        note = f"{len(bad)} test(s) did not pass" + (
            f" ({errors} error(s): a file or fixture failed)" if errors else ""
        )
        return "failed", note + (f"; {named} of them with a named upstream defect" if named else "")
    if run.no_device and host["device_count"] == 0 and run.env.family != "cpu":
        return "not_proven", (
            f"no {run.env.family} device here: {run.no_device} device test(s) skipped as asked "
            f"(--skip-missing-hardware), {passed} passed; nothing about the hardware is proven"
        )
    if run.verdict == "fail":
        return "failed", "accelenv check failed: " + ", ".join(run.failed_checks[:10])
    if not passed:
        return "failed", "no test ran and passed: nothing was tested"
    return "passed", None


def build_record(run: Run, *, finished: float) -> dict[str, Any]:
    host = _host(run)
    outcome, note = outcome_of(run, host)
    return {
        "format": FORMAT,
        "id": run.id,
        "run_url": _run_url(),
        "runner": runner_name(),
        "note": note,
        "env": {
            "id": run.env.id,
            "lock_sha256": _lock_sha256(run.env),
            "image": os.environ.get("ACCELENV_IMAGE"),
            "frameworks": _frameworks(run.env),
        },
        "host": host,
        "check": {"verdict": run.verdict, "failed": run.failed_checks},
        "outcome": outcome,
        "tests": list(run.tests.values()),
        "perf": [asdict(f) for f in run.figures],
        "started": format_time(run.started),
        "finished": format_time(finished),
    }


def pytest_unconfigure(config: pytest.Config) -> None:
    run = current_run(config)
    if run is not None and run in _RUNS:
        _RUNS.remove(run)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = current_run(session.config)
    if run is None:
        return
    if (
        exitstatus == pytest.ExitCode.INTERRUPTED
        and run.interrupted is None
        and not any(t["outcome"] == "error" for t in run.tests.values())
    ):
        run.interrupted = "the run was interrupted before it completed"
    data = build_record(run, finished=max(time.time(), run.started))
    problem = check_record(data, run.matrix, now=time.time())
    path = _write(run, data)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"accelenv: result record {path} ({data['outcome']})")
    if problem is not None:  # a bug here, not the host's fault; the run must not look green
        if reporter is not None:
            reporter.write_line(f"accelenv: the record does not validate: {problem}")
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    elif data["outcome"] in ("failed", "incomplete") and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the check failed, or nothing ran: not a green run


def _write(run: Run, data: dict[str, Any]) -> Path:
    from accelenv.fileio import write_atomic

    path = run.folder / f"{run.id}{SUFFIX}"
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n", inside=run.folder)
    return path
