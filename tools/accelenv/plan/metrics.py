"""Metrics: the node's verdicts, devices, driver and runtime, and the newest result record's figures, in Prometheus'
text format for node-exporter's textfile collector (a `*.prom` file in its `--collector.textfile.directory`), which
is how Ray's Grafana dashboards, scraping the same Prometheus, can show them beside Ray's own.

A view, not a new judge: each verdict is that of the findings `check` returned, each figure a record's. Written by
`prometheus_client` (imported only here, when metrics are asked for), whose exposition escapes label values and
formats numbers as Prometheus' own parser reads them back.

    accelenv_env_verdict{env="gpu-nvidia-cu132",verdict="pass"} 1.0      one series per verdict, 1 for the current
    accelenv_env_checks{env="gpu-nvidia-cu132",status="fail"} 0.0        findings per status
    accelenv_devices{family="nvidia",sku="h100-sxm"} 8.0
    accelenv_accelerator_info{family="nvidia",driver="590.48.01",runtime="13.1"} 1.0
    accelenv_record_figure{env=...,sku=...,name="matmul",unit="TFLOP/s",dtype="bf16"} 612.0
    accelenv_record_fraction_of_peak{...} 0.62
    accelenv_record_verdict{env=...,verdict="pass"} 1.0
    accelenv_record_finished_timestamp_seconds{env=...} 1.7649e+09
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.check.verdict import verdict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from prometheus_client import CollectorRegistry

    from accelenv.check.verdict import Finding
    from accelenv.host.report import HostReport
    from accelenv.results.record import Record

VERDICTS = ("pass", "warn", "fail")
STATUSES = ("pass", "warn", "fail", "skip")
MAX_LABEL = 200  # a label value longer than this (a tool's odd string) is cut: a metric is no log


def prometheus_text(
    report: HostReport,
    verdicts: Mapping[str, list[Finding]],
    *,
    family: str,
    records: Sequence[Record] = (),
    version: str = "",
) -> str:
    """The exposition text of this node's metrics."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry(auto_describe=False)

    def gauge(name: str, help_text: str, labels: Sequence[str]) -> Gauge:
        return Gauge(name, help_text, list(labels), registry=registry)

    env_verdict = gauge(
        "accelenv_env_verdict", "The verdict of accelenv check ENV: 1 for the current one.", ["env", "verdict"]
    )
    checks = gauge("accelenv_env_checks", "Findings of accelenv check ENV, by status.", ["env", "status"])
    for env_id, found in sorted(verdicts.items()):
        current = str(verdict(found))
        for state in VERDICTS:
            env_verdict.labels(env=_v(env_id), verdict=state).set(1 if state == current else 0)
        for status in STATUSES:
            checks.labels(env=_v(env_id), status=status).set(sum(1 for f in found if str(f.status) == status))
    devices = gauge("accelenv_devices", "Accelerator devices the node shows, by SKU.", ["family", "sku"])
    info = gauge("accelenv_accelerator_info", "The accelerator's driver and runtime versions (always 1).",
                 ["family", "driver", "runtime"])  # fmt: skip
    acc = report.accelerator(family)
    if acc is not None:
        by_sku: dict[str, int] = {}
        for device in acc.devices:
            by_sku[device.sku or "unknown"] = by_sku.get(device.sku or "unknown", 0) + 1
        for sku, count in sorted(by_sku.items()):
            devices.labels(family=family, sku=_v(sku)).set(count)
        if not acc.devices:
            devices.labels(family=family, sku="none").set(0)
        info.labels(family=family, driver=_v(acc.driver_version or ""), runtime=_v(acc.runtime_version or "")).set(1)
    else:
        devices.labels(family=family, sku="none").set(0)
    gauge("accelenv_info", "The accelenv that wrote these metrics (always 1).", ["version"]).labels(
        version=_v(version)
    ).set(1)
    _records(registry, records)
    return generate_latest(registry).decode("utf-8")


def _records(registry: CollectorRegistry, records: Sequence[Record]) -> None:
    """The newest record of each environment: its verdict, when it finished, and its figures."""
    from prometheus_client import Gauge

    def make(name: str, help_text: str, labels: Sequence[str]) -> Gauge:
        return Gauge(name, help_text, list(labels), registry=registry)

    newest: dict[str, Record] = {}
    for record in records:
        if record.env not in newest or (record.finished, record.id) > (
            newest[record.env].finished,
            newest[record.env].id,
        ):
            newest[record.env] = record
    if not newest:
        return
    labels = ["env", "sku", "name", "unit", "dtype"]
    figure = make("accelenv_record_figure", "The newest result record's performance figures (the median).", labels)
    fraction = make("accelenv_record_fraction_of_peak", "Those figures as a fraction of the SKU's peak.", labels)
    outcome = make(
        "accelenv_record_verdict", "The newest result record's verdict: 1 for the current one.", ["env", "verdict"]
    )
    finished = make(
        "accelenv_record_finished_timestamp_seconds", "When the newest result record's run finished.", ["env"]
    )
    for env_id, record in sorted(newest.items()):
        finished.labels(env=_v(env_id)).set(record.finished)
        for state in VERDICTS:
            outcome.labels(env=_v(env_id), verdict=state).set(1 if record.verdict == state else 0)
        for item in record.perf:
            names = {"env": _v(env_id), "sku": _v(record.sku or ""), "name": _v(item.name), "unit": _v(item.unit),
                     "dtype": _v(item.dtype)}  # fmt: skip
            figure.labels(**names).set(item.value)
            if item.fraction is not None:
                fraction.labels(**names).set(item.fraction)


def _v(text: str) -> str:
    return text[:MAX_LABEL]
