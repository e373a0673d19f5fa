"""Benchmarks: each module compares against a baseline measured in the same run."""
