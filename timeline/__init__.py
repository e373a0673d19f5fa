"""Hudi-style timeline: ACID instants on object storage with conditional writes, and tables.

See docs/timeline-protocol.md for the object layout and the commit protocol.
"""

from .active import Timeline
from .errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    InstantNotFound,
    InvalidDataFile,
    InvalidInstant,
    PlanError,
    SchemaMismatch,
    TimelineError,
)
from .instant import (
    ACTIONS,
    CLEAN,
    COMMIT,
    COMMIT_ACTIONS,
    COMPACTION,
    DELTA_COMMIT,
    INDEXING,
    REPLACE_COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    InstantTimeGenerator,
    State,
    format_name,
    parse_name,
    parse_time,
)
from .layout import data_instant_time
from .metadata import DataFile, Entry
from .parquet_io import checksummed, footer_span, row_group_spans
from .settings import ArchivalSettings, TableSettings
from .snapshot import Snapshot, TableState
from .table import Table
from .table_schema import check_schema
from .txn import Transaction

ActiveTimeline = Timeline

__all__ = [
    "ACTIONS",
    "CLEAN",
    "COMMIT",
    "COMMIT_ACTIONS",
    "COMPACTION",
    "DELTA_COMMIT",
    "INDEXING",
    "REPLACE_COMMIT",
    "RESTORE",
    "ROLLBACK",
    "SAVEPOINT",
    "WRITE_ACTIONS",
    "ActiveTimeline",
    "ArchivalSettings",
    "CommitConflict",
    "CommitOutcomeUnknown",
    "DataFile",
    "Entry",
    "Instant",
    "InstantNotFound",
    "InstantTimeGenerator",
    "InvalidDataFile",
    "InvalidInstant",
    "PlanError",
    "SchemaMismatch",
    "Snapshot",
    "State",
    "Table",
    "TableSettings",
    "TableState",
    "Timeline",
    "TimelineError",
    "Transaction",
    "check_schema",
    "checksummed",
    "data_instant_time",
    "footer_span",
    "format_name",
    "parse_name",
    "parse_time",
    "row_group_spans",
]
