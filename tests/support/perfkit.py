"""The conformance suite's performance figures, whichever framework measured them: each is judged against the
SKU's documented peak (matrix data), a figure below the environment's stated fraction of peak (or one with no peak
to judge it by) warns, and every figure goes into the run's result record."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from accelenv.results.plugin import current_run
from accelenv.results.plugin import host_sku as plugin_host_sku
from accelenv.results.record import Figure

if TYPE_CHECKING:
    import pytest
    from devicekit import Expected

    from accelenv.matrix import Sku

WARMUP, REPS = 3, 10
PEAK_OF = {"matmul": "matmul_tflops", "memory_bandwidth": "memory_gb_s"}


class PerformanceWarning(UserWarning):
    """A conformance figure below the environment's stated fraction of the SKU's peak, or without a peak."""


def spread(values: list[float]) -> float:
    """(max - min) / median of a figure's timed repetitions: a drop within it is noise (docs/results.md)."""
    import statistics

    middle = statistics.median(values) if values else 0.0
    return (max(values) - min(values)) / middle if len(values) > 1 and middle > 0 else 0.0


def report_figure(
    request: pytest.FixtureRequest, expected: Expected, sku: Sku | None, figure: dict[str, Any], *, share: float = 1.0
) -> Figure:
    """The figure judged against the peak, handed to the result record; a warning when it is low or unjudged.
    `share`: the part of the SKU's peak that the one measured device holds (a TPU7x chip is two JAX devices)."""
    peak_of = PEAK_OF.get(figure["name"])
    peak = getattr(sku.peak, peak_of) if sku and sku.peak and peak_of else None
    if peak is not None and share != 1.0:
        peak = peak * share
    minimum = expected.env.perf_min_fraction
    fraction = figure["value"] / peak if peak else None
    warning = None
    if peak_of and peak is None:
        warning = f"{sku.id if sku else 'this device'} has no documented {figure['name']} peak in the matrix"
    elif fraction is not None and minimum is not None and fraction < minimum:
        warning = f"{figure['value']:.1f} {figure['unit']} is {fraction:.0%} of the {peak:g} peak, below {minimum:.0%}"
    result = Figure(**figure, peak=peak, fraction=fraction, min_fraction=minimum, warning=warning)
    run = current_run(request.config)
    if run is not None:
        run.figures.append(result)
    print(f"{result.name}: {result.value:.3f} {result.unit}" + (f" ({fraction:.0%} of peak)" if fraction else ""))
    if warning and (peak is not None or expected.env.family != "cpu"):
        warnings.warn(PerformanceWarning(f"{result.name}: {warning}"), stacklevel=2)
    assert result.value > 0
    return result


def host_sku(request: pytest.FixtureRequest, expected: Expected) -> Sku | None:
    """The SKU the run's host snapshot identified (the record's, `accelenv.results.plugin.host_sku`), when it is
    one of the environment's; on the CPU, the environment's SKU of this machine's architecture."""
    run = current_run(request.config)
    found = plugin_host_sku(expected.matrix, expected.env, run.report if run else None)
    return next((s for s in expected.matrix.env_skus(expected.env) if s.id == found), None)
