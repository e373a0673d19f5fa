"""Both Spark writers' keyed paths (upsert, insert, delete; see keyed_shards.py for the job).

- native (`flowledger.spark.write(df, uri, options={"operation": "upsert", ...})`) and data
  source (`flowledger.spark.save(df, uri, options={...})`) alike: the driver plans, Spark's
  tasks run the one-process writer's array-level steps on shards no two tasks share (new
  file slices on a copy-on-write table, log blocks and new file groups in a delta commit on
  a merge-on-read table), the driver commits exactly what they wrote (recording `save`'s
  write id and inputs as the data source would).

A bare `df.write.format("flowledger").option("operation", "upsert")` cannot take this path:
PySpark's Python Data Source API gives a writer its rows as they come, with no way to ask
Spark for the shuffle that brings a file group's records together, so the data source
refuses it with a pointer to `flowledger.spark.save`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from storage import StoreSettings
from timeline import (
    COMMIT,
    DELTA_COMMIT,
    DuplicateKeys,
    Instant,
    KeyedProperties,
    OnDuplicate,
    Table,
    TableType,
    WriteOperation,
    commit_shards,
)

from .arrow import arrow_schema
from .commit_info import (
    WRITE_ID_METADATA_KEY,
    CommitHook,
    CommitInfo,
    SparkJobInfo,
    commit_hooks,
)
from .committing import commit_info, extra_metadata, job_info, run_hooks
from .conf import store_settings, table_settings, write_conf
from .direct_scan import NotDirect, ParquetScan, parquet_scan, read_scan
from .errors import SparkWriteError
from .keyed_options import KeyedOptions, keyed_options, resolve_properties
from .paths import TablePath, resolve_repo_uri, table_path
from .shuffle import sized_shuffle
from .small_input import DEFAULT_STREAM_THRESHOLD, STREAM_THRESHOLD_CONF, within
from .table_handles import Key, keep_table, take_table
from .writer_options import input_files_option

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Opened:
    path: TablePath
    table: Table
    props: KeyedProperties
    kopts: KeyedOptions
    settings: StoreSettings
    key: Key  # the session's handle on the table (table_handles.py)
    conf: Mapping[str, str]  # the session's keys a write reads, read once per write

    @property
    def merge_on_read(self) -> bool:
        return self.props.table_type == TableType.MERGE_ON_READ


def _open(df: Any, uri: str, mode: str, options: Mapping[str, str]) -> _Opened:
    if mode != "append":
        raise SparkWriteError(f"a keyed write (upsert, insert, delete) appends, not {mode!r}")
    conf = write_conf(df.sparkSession)
    path = table_path(uri)
    settings = store_settings(conf)
    key = (path.store_uri, settings, table_settings(conf, options))
    table, props = resolve_properties(take_table(df.sparkSession, key), options)
    kopts = keyed_options(options) or KeyedOptions(WriteOperation.UPSERT)
    return _Opened(path, table, props, kopts, settings, key, conf)


def _keyed_commit(
    df: Any,
    o: _Opened,
    job_meta: SparkJobInfo,
    hooks: Sequence[CommitHook] | None,
    more: Mapping[str, str] | None = None,
    repo_option: str | None = None,
) -> CommitInfo:
    """One keyed commit: an insert of a plain Parquet scan of at most
    `spark.flowledger.keyed.driverStreamThreshold` bytes streamed on the driver when it can
    be (direct_scan.py), else written by Spark's tasks with the shuffles sized to the
    input. `more`: commit metadata to add; `repo_option`: the provenance repository asked
    for."""
    scan = parquet_scan(df)
    if (
        scan is not None
        and o.kopts.operation == WriteOperation.INSERT
        and not o.merge_on_read
        and within(df, STREAM_THRESHOLD_CONF, DEFAULT_STREAM_THRESHOLD)
    ):
        done = _insert_scan(o, scan, extra_metadata(job_meta, more))
        if done is not None:
            return _committed(df.sparkSession, o, done, job_meta, hooks, repo_option)
    with sized_shuffle(df):
        return _write_shards(df, o, job_meta, hooks, more, repo_option, scan)


def _write_shards(
    df: Any,
    o: _Opened,
    job_meta: SparkJobInfo,
    hooks: Sequence[CommitHook] | None,
    more: Mapping[str, str] | None,
    repo_option: str | None,
    scan: ParquetScan | None,
) -> CommitInfo:
    """One keyed commit whose objects Spark's tasks write: new file slices (a `commit`), or
    log blocks and new file groups (a `deltacommit` on a merge-on-read table); a small
    input on the driver (read from its files when `scan` names them)."""
    from .keyed_shards import plan_and_write

    spark = df.sparkSession
    action = DELTA_COMMIT if o.merge_on_read else COMMIT
    txn = o.table.begin(action, operation=o.kopts.operation)
    try:
        incoming = arrow_schema(df.schema) if o.kopts.upsert else None
        written = plan_and_write(
            df, o.table, txn, o.props, o.kopts.operation, o.kopts.on_duplicate,
            o.path.store_uri, o.settings, incoming, scan,
        )  # fmt: skip
    except BaseException:
        txn.abort()
        raise
    meta = extra_metadata(job_meta, more)
    instant = commit_shards(
        txn, written.plan, written.shards, extra_metadata=meta, table=o.table,
        sweep=written.by_tasks,
    )  # fmt: skip
    return _committed(spark, o, instant, job_meta, hooks, repo_option)


def _committed(
    spark: Any,
    o: _Opened,
    instant: Instant,
    job_meta: SparkJobInfo,
    hooks: Sequence[CommitHook] | None,
    repo_option: str | None,
) -> CommitInfo:
    """What the commit wrote, handed to the commit hooks (provenance among them)."""
    keep_table(spark, o.key, o.table)
    entry = o.table.tl.entry_of(instant)  # committed by this table handle: no read
    repo = resolve_repo_uri(repo_option, o.conf)
    info = replace(
        commit_info(o.path, instant, o.kopts.operation, entry.added, job_meta, repo, keyed=True),
        entry=entry,
        store=o.table.store,
    )
    run_hooks(info, commit_hooks(spark) if hooks is None else hooks)
    return info


def _insert_scan(o: _Opened, scan: ParquetScan, meta: Mapping[str, str]) -> Instant | None:
    """An insert of a plain Parquet scan into a copy-on-write table, written as the Python
    path writes a stream (`Table.insert` of record batches): the driver reads the files with
    pyarrow and streams them into the one-process writer, no Spark job, no rows through the
    JVM. None when it cannot stand for Spark's rows — a file that is not what Spark reads, or
    a key met twice (two batches of the stream cannot combine it, a table can) — after the
    attempt rolled back: the caller writes the rows Spark gives it."""
    if o.kopts.on_duplicate != OnDuplicate.FAIL:  # "drop" would keep the first of two
        return None
    try:
        done = o.table.insert(read_scan(scan, o.settings), OnDuplicate.FAIL, meta)
    except (NotDirect, DuplicateKeys) as exc:
        log.info("flowledger: keyed insert of %s through Spark's rows: %s", o.path.given, exc)
        return None
    log.info(
        "flowledger: keyed insert into %s read directly from %d Parquet file(s)",
        o.path.given, len(scan.files),
    )  # fmt: skip
    return done


def write_keyed(
    df: Any,
    uri: str,
    mode: str,
    options: Mapping[str, str],
    hooks: Sequence[CommitHook] | None = None,
) -> CommitInfo:
    """The native writer's keyed write: one commit of the rewritten file groups (a delta
    commit of log blocks on a merge-on-read table), its shuffles sized to the input."""
    job_meta = job_info(df.sparkSession, df)
    return _keyed_commit(df, _open(df, uri, mode, options), job_meta, hooks)


def save_keyed(
    df: Any, uri: str, mode: str, options: Mapping[str, str], write_id: str
) -> CommitInfo:
    """The data source's keyed write: the same commit, recording the data source's job, its
    inputs and `write_id`, committed by this driver (so it returns what it committed, with
    no read of the timeline to find it); its shuffles sized to the input."""
    o = _open(df, uri, mode, options)
    job_meta = replace(  # the inputs `save` found (or was given), not asked of Spark again
        job_info(df.sparkSession, None, "flowledger.datasource"),
        input_files=input_files_option(options),
    )
    more = {WRITE_ID_METADATA_KEY: write_id}
    return _keyed_commit(df, o, job_meta, None, more, options.get("repo"))
