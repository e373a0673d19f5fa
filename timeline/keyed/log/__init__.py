"""Log blocks and log objects of merge-on-read tables (Hudi's log files): encoding,
sealing, writing and reading them (a log object of format 4 is one Arrow IPC stream whose
record batches are its blocks: stream.py; formats 1-3: block.py). Exports what the
readers, writers and compaction use."""

from .block import read_log
from .implied import DELETE, OP_COL, UPSERT
from .objects import (
    Block,
    LogCache,
    encode,
    fetch_whole,
    log_object_name,
    read_log_object,
    write_log_object,
)

__all__ = [
    "DELETE",
    "OP_COL",
    "UPSERT",
    "Block",
    "LogCache",
    "encode",
    "fetch_whole",
    "log_object_name",
    "read_log",
    "read_log_object",
    "write_log_object",
]
