"""The data source's writer for a keyed write `flowledger.spark.save` planned
(keyed_writers.py): each task rewrites the file groups whose change rows it holds (sorted by
group), the commit worker completes the instant with their write stats."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from storage import open_store
from timeline import commit_keyed

from .committing import commit_info, run_hooks
from .conf import table_settings
from .keyed import iter_groups, rewrite_group, task_writer
from .keyed_writers import KeyedTask
from .paths import TablePath
from .writer_options import FilesWritten, gather


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
        got = gather(self.facts, self.options, messages)
        stats = [s for m in got.messages for s in m.stats]
        store = open_store(self.path.store_uri, self.facts.store)
        txn = self.task.pending.resume(store, table_settings(self.facts.conf, self.options))
        instant = commit_keyed(
            txn,
            self.task.shipped.plan,
            got.files,
            stats,
            files_read=self.task.files_read,
            extra_metadata=got.metadata,
            sweep=True,
            heartbeat_written=got.beat,
        )
        info = commit_info(
            self.path, instant, self.task.operation, got.files, got.job, self.repo_uri, keyed=True
        )
        run_hooks(info, self.facts.hooks)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        store = open_store(self.path.store_uri, self.facts.store)
        self.task.pending.abort(store, table_settings(self.facts.conf, self.options))
