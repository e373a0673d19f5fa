"""Both Spark writers' keyed paths (upsert, insert, delete; see keyed.py for the jobs).

- native (`flowledger.spark.write(df, uri, options={"operation": "upsert", ...})`): the
  driver plans, Spark rewrites every touched file group in a grouped Arrow function, the
  driver commits the returned descriptions (`timeline.keyed.commit_keyed`);
- data source (`flowledger.spark.save(df, uri, options={...})`): the driver plans the same
  jobs, detaches the instant (`timeline.PendingWrite`) and writes the change rows, sorted by
  file group, through `format("flowledger")`: its tasks rewrite the groups with a
  `TaskWriter`, its commit worker completes the instant.

A merge-on-read table takes neither: both writers run its delta commit as keyed_delta.py
does (the executors write log blocks and new file groups, the driver commits, recording
`save`'s write id and inputs as the data source would).

A bare `df.write.format("flowledger").option("operation", "upsert")` cannot take this path:
PySpark's Python Data Source API gives a writer its rows as they come, with no way to ask
Spark for the shuffle that brings a file group's records together, so the data source
refuses it with a pointer to `flowledger.spark.save`.
"""

from __future__ import annotations

import base64
import contextlib
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from storage import StoreSettings, open_store
from timeline import (
    COMMIT,
    DELTA_COMMIT,
    KeyedProperties,
    PendingWrite,
    Table,
    Transaction,
    WriteTarget,
    commit_keyed,
    plan_keyed_write,
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
from .conf import conf_of, store_settings, table_settings
from .errors import SparkWriteError
from .keyed import KeyedJob, Shipped, plan_job, sorted_by_group
from .keyed_options import TABLE_TYPES, KeyedOptions, keyed_options, resolve_properties
from .paths import TablePath, resolve_repo_uri, table_path
from .shuffle import sized_shuffle
from .writer_options import KEYED_TASK_OPTION, NAME, WRITE_ID_OPTION, input_files_option


@dataclass(frozen=True)
class _Opened:
    path: TablePath
    table: Table
    props: KeyedProperties
    kopts: KeyedOptions
    settings: StoreSettings

    @property
    def merge_on_read(self) -> bool:
        return self.props.table_type == TABLE_TYPES[1]


def _open(df: Any, uri: str, mode: str, options: Mapping[str, str]) -> _Opened:
    if mode != "append":
        raise SparkWriteError(f"a keyed write (upsert, insert, delete) appends, not {mode!r}")
    conf = conf_of(df.sparkSession)
    path = table_path(uri)
    settings = store_settings(conf)
    table = Table.open(open_store(path.store_uri, settings), table_settings(conf, options))
    table, props = resolve_properties(table, options)
    kopts = keyed_options(options) or KeyedOptions("upsert")
    return _Opened(path, table, props, kopts, settings)


def _begin(df: Any, o: _Opened) -> tuple[Transaction, KeyedJob]:
    txn = o.table.begin(COMMIT, operation=o.kopts.operation)
    try:
        incoming = arrow_schema(df.schema) if o.kopts.upsert else None
        plan = plan_keyed_write(o.table, txn, o.props, incoming)
        job = plan_job(df, plan, o.kopts, o.path.store_uri, o.settings, WriteTarget.of(txn))
    except BaseException:
        txn.abort()
        raise
    return txn, job


def _write_delta(
    df: Any,
    o: _Opened,
    job_meta: SparkJobInfo,
    hooks: Sequence[CommitHook] | None,
    more: Mapping[str, str] | None = None,
    repo_option: str | None = None,
) -> CommitInfo:
    """A merge-on-read table's keyed write: one delta commit, logs written by the tasks
    (`more`: commit metadata to add; `repo_option`: the provenance repository asked for)."""
    from .keyed_delta import commit_delta, plan_and_write

    spark = df.sparkSession
    txn = o.table.begin(DELTA_COMMIT, operation=o.kopts.operation)
    try:
        incoming = arrow_schema(df.schema) if o.kopts.upsert else None
        plan, shards = plan_and_write(
            df, o.table, txn, o.props, o.kopts.operation, o.kopts.on_duplicate,
            o.path.store_uri, o.settings, incoming,
        )  # fmt: skip
    except BaseException:
        txn.abort()
        raise
    instant = commit_delta(txn, plan, shards, extra_metadata=extra_metadata(job_meta, more))
    files = [f for s in shards for f in s.files]
    repo = resolve_repo_uri(repo_option, conf_of(spark))
    info = commit_info(o.path, instant, o.kopts.operation, files, job_meta, repo, keyed=True)
    run_hooks(info, commit_hooks(spark) if hooks is None else hooks)
    return info


def write_keyed(
    df: Any,
    uri: str,
    mode: str,
    options: Mapping[str, str],
    hooks: Sequence[CommitHook] | None = None,
) -> CommitInfo:
    """The native writer's keyed write: one commit of the rewritten file groups (a delta
    commit of log blocks on a merge-on-read table), its shuffles sized to the input."""
    with sized_shuffle(df):
        return _write_keyed(df, uri, mode, options, hooks)


def _write_keyed(
    df: Any,
    uri: str,
    mode: str,
    options: Mapping[str, str],
    hooks: Sequence[CommitHook] | None,
) -> CommitInfo:
    from .keyed import rewrite_natively

    spark = df.sparkSession
    job_meta = job_info(spark, df)
    o = _open(df, uri, mode, options)
    if o.merge_on_read:
        return _write_delta(df, o, job_meta, hooks)
    txn, job = _begin(df, o)
    try:
        files, stats, beat = rewrite_natively(job)
        files_read = job.files_read()
    except BaseException:
        txn.abort()
        raise
    finally:
        job.release()
    instant = commit_keyed(
        txn,
        job.shipped.plan,
        files,
        stats,
        files_read=files_read,
        extra_metadata=extra_metadata(job_meta),
        sweep=True,
        heartbeat_written=beat,
    )
    repo = resolve_repo_uri(None, conf_of(spark))
    info = commit_info(o.path, instant, o.kopts.operation, files, job_meta, repo, keyed=True)
    run_hooks(info, commit_hooks(spark) if hooks is None else hooks)
    return info


@dataclass(frozen=True)
class KeyedTask:
    """A keyed write planned by the driver, for the data source's tasks and commit worker."""

    shipped: Shipped
    pending: PendingWrite
    operation: str
    files_read: int

    def encode(self) -> str:
        return base64.b64encode(pickle.dumps(self)).decode()

    @staticmethod
    def decode(text: str) -> KeyedTask:
        task = pickle.loads(base64.b64decode(text))  # written by this job's own driver
        assert isinstance(task, KeyedTask)
        return task


def save_keyed(df: Any, uri: str, mode: str, options: Mapping[str, str], write_id: str) -> None:
    """The data source's keyed write: plan on the driver, rewrite in the data source's
    tasks, complete in its commit worker (the caller finds the commit by `write_id`); its
    shuffles sized to the input."""
    with sized_shuffle(df):
        _save_keyed(df, uri, mode, options, write_id)


def _save_keyed(df: Any, uri: str, mode: str, options: Mapping[str, str], write_id: str) -> None:
    o = _open(df, uri, mode, options)
    if o.merge_on_read:
        job_meta = replace(
            job_info(df.sparkSession, df, "flowledger.datasource"),
            input_files=input_files_option(options),
        )
        more = {WRITE_ID_METADATA_KEY: write_id}
        _write_delta(df, o, job_meta, None, more, options.get("repo"))
        return
    kopts = o.kopts
    txn, job = _begin(df, o)
    try:
        files_read = job.files_read()
        # The tasks need the snapshot's files, not the index's filters.
        shipped = replace(job.shipped, plan=replace(job.shipped.plan, stats={}))
    except BaseException:
        job.release()
        txn.abort()
        raise
    pending = PendingWrite.detach(txn)
    task = KeyedTask(shipped, pending, kopts.operation, files_read)
    opts = {**options, KEYED_TASK_OPTION: task.encode(), WRITE_ID_OPTION: write_id}
    try:
        sorted_by_group(job).write.format(NAME).mode("append").options(**opts).save(uri)
    except BaseException:
        # The data source aborts what it began; this covers a failure before its writer ran.
        conf = conf_of(df.sparkSession)
        store = open_store(table_path(uri).store_uri, store_settings(conf))
        with contextlib.suppress(Exception):
            pending.abort(store, table_settings(conf, options))
        raise
    finally:
        job.release()
