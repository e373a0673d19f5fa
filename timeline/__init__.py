"""Hudi-style timeline: ACID instants on object storage with conditional writes, and tables.

See docs/timeline-protocol.md for the object layout and the commit protocol. Engines that write
data files in their own processes (Spark) use `TaskWriter` in their tasks and `commit_files` on
the driver; every writer records column statistics with `footer_stats` and names partitions
with `partition_path` (docs/spark.md, "The seam").
"""

from .active import Timeline
from .crash import point as crash_point
from .engine_commit import PendingWrite, commit_files, describe_files, sweep_strays
from .errors import (
    CommitConflict,
    CommitUnknownOutcome,
    CorruptTimelineObject,
    DuplicateKeys,
    InstantNotFound,
    InvalidDataFile,
    InvalidInstant,
    PlanError,
    RangeNotReadable,
    SchemaMismatch,
    TimelineError,
)
from .file_stats import (
    ColumnStats,
    describe_bytes,
    describe_stored,
    footer_stats,
    parquet_metadata,
    read_footer,
    rows_and_stats,
    stat_value,
)
from .heartbeat import heartbeat_body
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
from .keyed import (
    META_COLUMNS,
    RECORD_KEY_COL,
    ChangesPlan,
    CommitUnit,
    KeyedProperties,
    KeyedWritePlan,
    PropertiesError,
    commit_keyed,
    locate_in_file,
    place_inserts,
    plan_changes,
    plan_keyed_write,
    read_changed_file,
    read_commit_changes,
    record_columns,
    write_slice,
)
from .keyed.mor_read import read_slice
from .keyed.slices import MorSlice
from .layout import TIMELINE, data_instant_time, data_prefix
from .metadata import DataFile, Entry
from .parquet_io import (
    checksummed,
    footer_span,
    local_parquet,
    read_verified,
    row_group_spans,
    to_parquet_bytes,
)
from .partitioning import (
    NULL_PARTITION,
    partition_from_stats,
    partition_path,
    partition_value,
    split_partitions,
)
from .schema import conform, merge_schemas
from .settings import KEEP_LATEST_COMMITS, ArchivalSettings, TableSettings
from .snapshot import Snapshot, TableState
from .table import Table
from .table_schema import check_schema, latest_schema
from .task_writer import TaskWriter, WriteTarget
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
    "KEEP_LATEST_COMMITS",
    "META_COLUMNS",
    "NULL_PARTITION",
    "RECORD_KEY_COL",
    "REPLACE_COMMIT",
    "RESTORE",
    "ROLLBACK",
    "SAVEPOINT",
    "TIMELINE",
    "WRITE_ACTIONS",
    "ActiveTimeline",
    "ArchivalSettings",
    "ChangesPlan",
    "ColumnStats",
    "CommitConflict",
    "CommitUnit",
    "CommitUnknownOutcome",
    "CorruptTimelineObject",
    "DataFile",
    "DuplicateKeys",
    "Entry",
    "Instant",
    "InstantNotFound",
    "InstantTimeGenerator",
    "InvalidDataFile",
    "InvalidInstant",
    "KeyedProperties",
    "KeyedWritePlan",
    "MorSlice",
    "PendingWrite",
    "PlanError",
    "PropertiesError",
    "RangeNotReadable",
    "SchemaMismatch",
    "Snapshot",
    "State",
    "Table",
    "TableSettings",
    "TableState",
    "TaskWriter",
    "Timeline",
    "TimelineError",
    "Transaction",
    "WriteTarget",
    "check_schema",
    "checksummed",
    "commit_files",
    "commit_keyed",
    "conform",
    "crash_point",
    "data_instant_time",
    "data_prefix",
    "describe_bytes",
    "describe_files",
    "describe_stored",
    "footer_span",
    "footer_stats",
    "format_name",
    "heartbeat_body",
    "latest_schema",
    "local_parquet",
    "locate_in_file",
    "merge_schemas",
    "parquet_metadata",
    "parse_name",
    "parse_time",
    "partition_from_stats",
    "partition_path",
    "partition_value",
    "place_inserts",
    "plan_changes",
    "plan_keyed_write",
    "read_changed_file",
    "read_commit_changes",
    "read_footer",
    "read_slice",
    "read_verified",
    "record_columns",
    "row_group_spans",
    "rows_and_stats",
    "split_partitions",
    "stat_value",
    "sweep_strays",
    "to_parquet_bytes",
    "write_slice",
]
