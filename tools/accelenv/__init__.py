"""accelenv: reproducible accelerator environments from one compatibility matrix."""

__version__ = "0.1.0"
