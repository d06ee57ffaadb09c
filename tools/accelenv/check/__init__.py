"""The checker: compares one environment of the matrix with one host report. Pure."""
