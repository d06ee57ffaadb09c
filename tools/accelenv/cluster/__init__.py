"""Cluster-wide checks (Ray)."""
