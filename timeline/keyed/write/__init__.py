"""Keyed writes (Hudi's write client): planning a batch against the index, deciding what
it does to stored records, placing inserts, and writing new base files (copy-on-write) or
log blocks (merge-on-read, a delta commit). One request value states a write and one entry
point writes it (client.py). Exports what the table operations use."""

from .client import write_keyed
from .planner import prepare_batch
from .planning import Filter
from .request import KeyedWriteRequest, WriteOperation
from .stream import BatchSource, chained, insert_stream, tables_of

__all__ = [
    "BatchSource",
    "Filter",
    "KeyedWriteRequest",
    "WriteOperation",
    "chained",
    "insert_stream",
    "prepare_batch",
    "tables_of",
    "write_keyed",
]
