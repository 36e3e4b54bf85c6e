"""Benchmarks of the scheduling core: cycle speed, placement quality against an exact solver, fragmentation."""
