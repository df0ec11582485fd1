"""Benchmarks: run a module with ``python -m bench.<name>`` from the repository root."""
