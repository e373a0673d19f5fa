"""Both Spark writers' keyed paths (upsert, insert, delete; see keyed.py for the jobs).

- native (`flowledger.spark.write(df, uri, options={"operation": "upsert", ...})`): the
  driver plans, Spark rewrites every touched file group in a grouped Arrow function, the
  driver commits the returned descriptions (`timeline.keyed.commit_keyed`);
- data source (`flowledger.spark.save(df, uri, options={...})`): the driver plans the same
  jobs, detaches the instant (`timeline.PendingWrite`) and writes the change rows, sorted by
  file group, through `format("flowledger")`: its tasks rewrite the groups with a
  `TaskWriter`, its commit worker completes the instant.

A bare `df.write.format("flowledger").option("operation", "upsert")` cannot take this path:
PySpark's Python Data Source API gives a writer its rows as they come, with no way to ask
Spark for the shuffle that brings a file group's records together, so the data source
refuses it with a pointer to `flowledger.spark.save`.
"""

from __future__ import annotations

import base64
import contextlib
import pickle
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from storage import open_store
from timeline import COMMIT, PendingWrite, Table, Transaction, WriteTarget
from timeline.keyed import KeyedProperties, commit_keyed, plan_write

from .commit_info import WRITE_ID_METADATA_KEY, CommitHook, CommitInfo, SparkJobInfo
from .committing import commit_info, extra_metadata, job_info, run_hooks
from .conf import conf_of, store_settings, table_settings
from .errors import SparkWriteError
from .keyed import KeyedJob, Shipped, iter_groups, plan_job, rewrite_group, sorted_by_group
from .keyed_options import KeyedOptions, keyed_options, resolve_properties
from .native import arrow_schema
from .paths import TablePath, resolve_repo_uri, table_path


def _begin(
    df: Any, uri: str, mode: str, options: Mapping[str, str]
) -> tuple[TablePath, Transaction, KeyedProperties, KeyedOptions, KeyedJob]:
    if mode != "append":
        raise SparkWriteError(f"a keyed write (upsert, insert, delete) appends, not {mode!r}")
    conf = conf_of(df.sparkSession)
    path = table_path(uri)
    settings = store_settings(conf)
    table = Table.open(open_store(path.store_uri, settings), table_settings(conf, options))
    table, props = resolve_properties(table, options)
    kopts = keyed_options(options) or KeyedOptions("upsert")
    txn = table.begin(COMMIT, operation=kopts.operation)
    try:
        plan = plan_write(table, txn, props, arrow_schema(df.schema) if kopts.upsert else None)
        job = plan_job(df, plan, kopts, path.store_uri, settings, WriteTarget.of(txn))
    except BaseException:
        txn.abort()
        raise
    return path, txn, props, kopts, job


def write_keyed(
    df: Any,
    uri: str,
    mode: str,
    options: Mapping[str, str],
    hooks: Sequence[CommitHook] | None = None,
) -> CommitInfo:
    """The native writer's keyed write: one commit of the rewritten file groups."""
    from .keyed import rewrite_natively

    spark = df.sparkSession
    job_meta = job_info(spark, df)
    path, txn, _, kopts, job = _begin(df, uri, mode, options)
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
    info = commit_info(path, instant, kopts.operation, files, job_meta, repo)
    run_hooks(info, hooks)
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
    tasks, complete in its commit worker (the caller finds the commit by `write_id`)."""
    from .datasource import KEYED_TASK_OPTION, NAME, WRITE_ID_OPTION

    _, txn, _, kopts, job = _begin(df, uri, mode, options)
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


@dataclass
class KeyedTimelineWriter(DataSourceArrowWriter):
    """The data source's writer for a keyed write `save` planned: each task rewrites the
    file groups whose change rows it holds; the commit worker completes the instant."""

    facts: Any  # datasource.DriverFacts
    path: TablePath
    task: KeyedTask
    repo_uri: str
    options: dict[str, str]

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from pyspark import TaskContext

        from .datasource import FilesWritten
        from .keyed import task_writer

        ctx = TaskContext.get()
        job = (ctx.getLocalProperty("spark.job.description") or "") if ctx else ""
        writer = task_writer(self.task.shipped)
        out = FilesWritten(job=job)
        for group in iter_groups(iterator):
            got = rewrite_group(self.task.shipped, writer, group)
            if got is not None:
                out.files.append(got[0])
                out.stats.append(got[1])
        out.beat = writer.beat
        return out

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        from .datasource import WRITE_ID_OPTION, FilesWritten, _option, input_files_option

        written = [m for m in messages if isinstance(m, FilesWritten)]
        files = [f for m in written for f in m.files]
        stats = [s for m in written for s in m.stats]
        job = SparkJobInfo(
            app_id=self.facts.app_id,
            app_name=self.facts.app_name,
            job=next((m.job for m in written if m.job), "") or "flowledger.datasource",
            user=self.facts.user,
            input_files=input_files_option(self.options),
        )
        store = open_store(self.path.store_uri, self.facts.store)
        txn = self.task.pending.resume(store, table_settings(self.facts.conf, self.options))
        write_id = _option(self.options, WRITE_ID_OPTION)
        more = {WRITE_ID_METADATA_KEY: write_id} if write_id else None
        instant = commit_keyed(
            txn,
            self.task.shipped.plan,
            files,
            stats,
            files_read=self.task.files_read,
            extra_metadata=extra_metadata(job, more),
            sweep=True,
            heartbeat_written=any(m.beat for m in written),
        )
        info = commit_info(self.path, instant, self.task.operation, files, job, self.repo_uri)
        run_hooks(info, self.facts.hooks)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        store = open_store(self.path.store_uri, self.facts.store)
        self.task.pending.abort(store, table_settings(self.facts.conf, self.options))
