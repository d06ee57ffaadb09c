"""The matrix core: `matrix.toml` -> schema -> frozen model -> rules. Reads one file; touches nothing else."""

from accelenv.matrix.load import Validation, find_matrix, load_matrix, read_matrix, validate_file, validate_text
from accelenv.matrix.model import (
    CiTier,
    DriverRelease,
    DriverRule,
    Environment,
    Family,
    Hold,
    ImageRef,
    Matrix,
    Maturity,
    OsBase,
    Requirements,
    Runtime,
    Sku,
    Source,
)
from accelenv.matrix.problems import Problem, Severity

__all__ = [
    "CiTier",
    "DriverRelease",
    "DriverRule",
    "Environment",
    "Family",
    "Hold",
    "ImageRef",
    "Matrix",
    "Maturity",
    "OsBase",
    "Problem",
    "Requirements",
    "Runtime",
    "Severity",
    "Sku",
    "Source",
    "Validation",
    "find_matrix",
    "load_matrix",
    "read_matrix",
    "validate_file",
    "validate_text",
]
