"""The cost of reading a CDI spec with accelenv's reader (host/cdi_yaml.py), side by side with PyYAML's
`safe_load` on its C loader (what a program with a YAML dependency would use), as ratios.

Two kinds of input: the nvidia-ctk spec of the unit tests (tests/unit/data/cdi/nvidia-575.64.03.yaml), which
`check` reads before every session, and hostile lines at sizes up to the 4 MiB read limit (a long run of spaces
inside a key, a long double-quoted value, a long flow sequence). The reader must stay linear: the ratio to PyYAML
must not grow with the size. PyYAML is not a dependency of accelenv (images carry only packaging and jsonschema);
install it to run the comparison, otherwise only accelenv's times are printed.

    python benchmarks/cdi_yaml_cost.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from accelenv.host.cdi_yaml import loads  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

SPEC = REPO / "tests" / "unit" / "data" / "cdi" / "nvidia-575.64.03.yaml"


def cases() -> dict[str, str]:
    found = {"nvidia-ctk spec (575.64.03)": SPEC.read_text(encoding="utf-8")}
    for size in (96 * 1024, 4 * 1024 * 1024 - 64):
        label = f"{size // 1024} KiB"
        found[f"spaces in a key, {label}"] = "a" + " " * size + "b: c\n"
        found[f"double-quoted value, {label}"] = 'key: "' + "v" * size + '"\n'
        found[f"flow sequence, {label}"] = "key: [" + "a," * (size // 2) + "a]\n"
    return found


def timed(load: Callable[[str], object], text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.suppress(Exception):  # a refusal (YamlError, PyYAML's own errors) costs what it costs
            load(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def pyyaml() -> Callable[[str], object] | None:
    """PyYAML's safe loader on its C loader, or None when PyYAML is not installed."""
    try:
        import yaml  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return lambda text: yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    other = pyyaml()
    print(f"{'input':40} {'accelenv':>10} {'PyYAML':>10} {'ratio':>7}")
    for name, text in cases().items():
        ours = timed(loads, text, args.repeat)
        theirs = timed(other, text, args.repeat) if other is not None else None
        ratio = f"{ours / theirs:7.2f}" if theirs else "      -"
        print(f"{name:40} {ours * 1000:8.1f}ms {theirs * 1000 if theirs else 0:8.1f}ms {ratio}")


if __name__ == "__main__":
    main()
