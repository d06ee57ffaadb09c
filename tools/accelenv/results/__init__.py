"""Conformance result records: their schema, the pytest plugin that writes them, and reading them back."""
