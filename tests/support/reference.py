"""The tests' own matrix: a frozen copy of a realistic matrix (tests/support/data/reference-matrix.toml).

Tests about rules, plans, checks and the command line read it instead of the shipped matrix.toml, so a vendor
adding a SKU or the project retiring a runtime does not break them. Tests about the shipped matrix itself
(tests/unit/test_matrix_shipped.py, the drift checks of generated files) read matrix.toml.
"""

from __future__ import annotations

import functools
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tomlkit import TOMLDocument

REFERENCE_MATRIX = Path(__file__).resolve().parent / "data" / "reference-matrix.toml"
REFERENCE_TEXT = REFERENCE_MATRIX.read_text(encoding="utf-8")


def reference_document() -> TOMLDocument:
    """The reference matrix as a tomlkit document of the caller's own, to edit and dump: parsed once (70 ms for its
    45 KB), then copied through pickle (14 ms), so tests that each change one key do not parse it each time."""
    document: TOMLDocument = pickle.loads(_pickled_document())  # noqa: S301 - our own bytes, made just above
    return document


@functools.cache
def _pickled_document() -> bytes:
    import tomlkit

    return pickle.dumps(tomlkit.parse(REFERENCE_TEXT))
