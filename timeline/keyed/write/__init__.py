"""Keyed writes (Hudi's write client): planning a batch against the index, deciding what
it does to stored records, placing inserts, and writing new base files (copy-on-write) or
log blocks (merge-on-read, a delta commit). Exports what the table operations use."""

from .copy_on_write import keyed_write
from .merge_on_read import delta_write
from .planner import prepare_batch
from .planning import Filter

__all__ = [
    "Filter",
    "delta_write",
    "keyed_write",
    "prepare_batch",
]
