"""Merge-on-read reads: a file slice's base file merged with its log blocks. Exports what
the writers, the index, compaction and change reads use."""

from .slices import READ_PARALLELISM, read_slice, read_slices

__all__ = [
    "READ_PARALLELISM",
    "read_slice",
    "read_slices",
]
