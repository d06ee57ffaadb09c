"""The tests' own matrix: a frozen copy of a realistic matrix (tests/support/data/reference-matrix.toml).

Tests about rules, plans, checks and the command line read it instead of the shipped matrix.toml, so a vendor
adding a SKU or the project retiring a runtime does not break them. Tests about the shipped matrix itself
(tests/unit/test_matrix_shipped.py, the drift checks of generated files) read matrix.toml.
"""

from __future__ import annotations

from pathlib import Path

REFERENCE_MATRIX = Path(__file__).resolve().parent / "data" / "reference-matrix.toml"
REFERENCE_TEXT = REFERENCE_MATRIX.read_text(encoding="utf-8")
