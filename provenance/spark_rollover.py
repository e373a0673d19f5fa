"""Rollover as a PySpark job, for backlogs too large for one process.

The driver plans: it takes the whole contiguous run of journals above the high-water mark,
splits it into consecutive chunks of about `rollover_size` bytes and opens one rollover
instant. Each Spark task merges one chunk exactly as the local engine does (decode, sort by
event id, encode Parquet + term index) and writes the pair create-only under the instant's
data prefix, straight to the object store. The driver then commits every file in one instant
and deletes the journals. Until that commit nothing is visible, so a failed job is rolled back
like any failed write; journals are Arrow IPC, which Spark cannot read natively, so tasks read
them through flowledger's store (S3 or local) rather than s3a.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from storage import ObjectStore, StoreSettings, open_store

from . import staging
from .catalog import Sums
from .index import build_terms
from .layout import TABLE, JournalRef
from .parquet_io import encode_events_file, encode_index
from .rollover import (
    RolloverResult,
    Verify,
    contiguous_run,
    delete_run,
    file_stats,
    list_journals,
)
from .settings import ProvenanceSettings
from .table import MergedFile, ProvenanceTable, write_merged_file

PREFIX = "provenance"


@dataclass(frozen=True)
class ChunkTask:
    """Everything one Spark task needs; plain data, so it pickles to the executors."""

    root_uri: str
    store_settings: StoreSettings
    journals: tuple[JournalRef, ...]
    first_id: int
    events_key: str
    index_key: str
    row_group_events: int
    compression: str
    compression_level: int
    index_fields: tuple[str, ...]
    index_row_group_terms: int


def merge_chunk(task: ChunkTask) -> MergedFile:
    """Runs on an executor: merge one chunk of journals into a file pair."""
    prov = open_store(task.root_uri, task.store_settings).scoped(PREFIX)
    merged = pa.concat_tables([staging.load(prov, j) for j in task.journals])
    merged = merged.sort_by("event_id")
    events = encode_events_file(
        merged, task.row_group_events, task.compression, task.compression_level
    )
    terms = build_terms(merged, task.index_fields, task.row_group_events)
    index = encode_index(terms, task.index_row_group_terms, task.compression)
    write_merged_file(prov.scoped(TABLE), task.events_key, task.index_key, events, index)
    return MergedFile(
        task.first_id,
        task.events_key,
        task.index_key,
        len(events),
        len(index),
        merged.num_rows,
        file_stats(merged),
        Sums.of_bytes(events),
        Sums.of_bytes(index),
    )


def chunk(run: Sequence[JournalRef], target_bytes: int) -> list[list[JournalRef]]:
    """Consecutive journals grouped into chunks of about `target_bytes`."""
    chunks: list[list[JournalRef]] = []
    size = 0
    for ref in run:
        if not chunks or size + ref.size > target_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(ref)
        size += ref.size
    return chunks


def rollover_with_spark(
    spark: Any,
    root: ObjectStore,
    store: ObjectStore,
    table: ProvenanceTable,
    settings: ProvenanceSettings,
    verify: Verify | None = None,
) -> RolloverResult | None:
    """Merge the whole journal backlog with Spark; one instant for all files written."""
    started = time.monotonic()
    high = table.committed(fresh=True).high_water
    journals = list_journals(store, high)
    if verify is not None:
        verify(high, [ref for ref, _ in journals])
    run = contiguous_run(journals, high, settings.journal_gap_timeout_s, max_bytes=2**62)
    if not run:
        return None
    root_settings: StoreSettings = getattr(root, "settings", StoreSettings())
    fields = (*settings.indexed_fields, *(f"attr.{a}" for a in settings.indexed_attributes))
    txn = table.begin_rollover()
    try:
        tasks = []
        for refs in chunk(run, settings.rollover_size):
            ekey, ikey = table.file_keys(txn, refs[0].first_id)
            tasks.append(
                ChunkTask(
                    root.uri, root_settings, tuple(refs), refs[0].first_id,
                    ekey, ikey, settings.row_group_events, settings.compression,
                    settings.compression_level, fields, settings.index_row_group_terms,
                )
            )  # fmt: skip
        files: list[MergedFile] = (
            spark.sparkContext.parallelize(tasks, len(tasks)).map(merge_chunk).collect()
        )
        table.finish_rollover(txn, files, run[-1].end_id, len(run))
    except BaseException:
        txn.abort()  # idempotent; deletes whatever the tasks wrote
        raise
    delete_run(store, run)
    return RolloverResult(
        len(files),
        sum(f.rows for f in files),
        len(run),
        sum(j.size for j in run),
        sum(f.events_size + f.index_size for f in files),
        time.monotonic() - started,
        run[0].first_id,
        run[-1].end_id,
    )


def active_session(spark: Any) -> Any:
    """`spark`, or the active SparkSession; a clear error without PySpark or a session."""
    if spark is not None:
        return spark
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise ValueError(
            "rollover engine 'spark' needs PySpark: pip install 'flowledger[spark]'"
        ) from exc
    session = SparkSession.getActiveSession()
    if session is None:
        raise ValueError("rollover engine 'spark': no active SparkSession; pass spark=")
    return session
