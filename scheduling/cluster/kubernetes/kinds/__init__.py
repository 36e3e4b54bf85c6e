"""Workload kinds Gangway manages; each kind is one module with the same small set of functions."""
