"""How long `accelenv validate` takes on the shipped matrix and on a generated 1,000-environment matrix.

The generated matrix is the shipped one plus 1,000 environments cloned from the shipped ones (real runtimes and
SKUs, unique ids, one default per family kept), so every rule does real work. Beside accelenv's full validation
(TOML + schema + model + rules), it times what a user would otherwise run: parsing the TOML alone, and parsing
plus a bare jsonschema check. Reported as milliseconds (median of several runs) and ratios.

    python benchmarks/validate_scale.py [--envs 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import jsonschema
import tomlkit

from accelenv.matrix import validate_text
from accelenv.matrix.schema import matrix_schema

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[1]


def generate(envs: int) -> str:
    """The shipped matrix with `envs` more environments cloned from the shipped ones."""
    doc = tomlkit.parse((REPO / "matrix.toml").read_text(encoding="utf-8"))
    originals = list(doc["envs"].items())
    for i in range(envs):
        name, env = originals[i % len(originals)]
        clone = tomlkit.parse(tomlkit.dumps(tomlkit.document().add("e", env)))["e"]
        clone["default"] = False
        clone["description"] = f"generated copy {i} of {name}"
        doc["envs"][f"{name}-gen{i}"] = clone
    return tomlkit.dumps(doc)


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    shipped = (REPO / "matrix.toml").read_text(encoding="utf-8")
    large = generate(args.envs)
    validate_text(shipped)  # warm caches (schema compilation) once, as a long-running CLI would not need to
    validator = jsonschema.Draft202012Validator(matrix_schema())

    def schema_only(text: str) -> object:
        return list(validator.iter_errors(tomllib.loads(text)))

    rows: dict[str, dict[str, float]] = {}
    for label, text in (("shipped", shipped), (f"{args.envs}-env", large)):
        result = validate_text(text)
        assert result.matrix is not None
        errors = [p for p in result.problems if p.is_error]
        assert not errors, errors[:3]
        rows[label] = {
            "envs": len(result.matrix.envs),
            "lines": text.count("\n"),
            "accelenv_validate_ms": best_of(args.repeat, partial(validate_text, text)) * 1000,
            "tomllib_parse_ms": best_of(args.repeat, partial(tomllib.loads, text)) * 1000,
            "tomllib_plus_jsonschema_ms": best_of(args.repeat, partial(schema_only, text)) * 1000,
        }
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'matrix':<10} {'envs':>5} {'lines':>6} {'validate':>10} {'parse only':>11} {'parse+schema':>13}  ratios")
    for label, r in rows.items():
        print(
            f"{label:<10} {r['envs']:>5} {r['lines']:>6} {r['accelenv_validate_ms']:>8.1f}ms "
            f"{r['tomllib_parse_ms']:>9.1f}ms {r['tomllib_plus_jsonschema_ms']:>11.1f}ms  "
            f"validate/parse {r['accelenv_validate_ms'] / r['tomllib_parse_ms']:.1f}x, "
            f"validate/(parse+schema) {r['accelenv_validate_ms'] / r['tomllib_plus_jsonschema_ms']:.2f}x"
        )
    big = rows[f"{args.envs}-env"]["accelenv_validate_ms"]
    small = rows["shipped"]["accelenv_validate_ms"]
    print(f"{args.envs}-env matrix / shipped matrix: {big / small:.1f}x; target under 1000 ms: {big:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
