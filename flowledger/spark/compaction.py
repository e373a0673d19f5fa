"""`flowledger.spark.compact`: a merge-on-read table's compaction run as a Spark job.

The driver does what `flowledger timeline compact` does, through the timeline's public API:
it picks up the pending compactions nobody is running (only scheduled, or inflight with an
expired heartbeat), else schedules one (`compaction.requested`), and starts each
(`timeline.start_compaction`: the plan checked against the table, `compaction.inflight`, a
transaction heartbeating on the driver). The executors run the plan's file-group operations,
one task per file group (`timeline.compact_file_group`: base and logs merged by the table's
merge, the new base file written with a `TaskWriter` at the name the plan fixes, described by
the one footer-to-stats function); only each file's description and write stats come back.
The driver completes the compaction as a `commit` (`timeline.complete_compaction`).

The crash rules are the Python compaction's, because the steps are its own: the base files are
in no commit until the completion, so a half-written one is never read; a failed job leaves the
plan pending and running it again writes the same objects; delta commits that complete while
the job runs belong to the new slices and never conflict with it.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import pyarrow as pa

from storage import StoreSettings, open_store
from timeline import (
    CommitConflict,
    CompactionRun,
    CompactionWork,
    DataFile,
    Table,
    compact_file_group,
    complete_compaction,
    runnable_compactions,
    start_compaction,
)

from .conf import conf_of, store_settings, table_settings
from .paths import table_path

#: The rows one task returns to the driver: a written base file and its write stats.
RESULT_SCHEMA = "file string, stat string"
#: Commit-metadata keys naming the engine and application that executed a compaction.
ENGINE_KEY = "flowledger.compaction.engine"
APP_KEY = "flowledger.compaction.spark.app"


def _compact_groups(
    work: CompactionWork, store_uri: str, store: StoreSettings, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: compact the file groups whose slices this task holds."""
    writer = work.writer(open_store(store_uri, store))
    for b in batches:
        files, stats = [], []
        for blob in b.column(1).to_pylist():
            sl = pickle.loads(blob)  # pickled by this job's own driver
            f, stat = compact_file_group(writer, work, sl)
            files.append(json.dumps(f.to_json()))
            stats.append(json.dumps(stat))
        yield pa.RecordBatch.from_arrays(
            [pa.array(files, pa.string()), pa.array(stats, pa.string())], names=["file", "stat"]
        )


def execute_on_spark(
    spark: Any, run: CompactionRun, store_uri: str, store: StoreSettings
) -> list[tuple[DataFile, dict[str, Any]]]:
    """Run a started compaction's file-group operations as one Spark job, a task per file
    group; each task gets its own slice (the plan is not shipped to every task whole)."""
    work = run.work
    n = len(work.slices)
    rows = [(i, pickle.dumps(sl)) for i, sl in enumerate(work.slices)]
    df = spark.createDataFrame(rows, "i int, slice binary").repartition(max(1, n), "i")
    shipped = replace(work, slices=())
    fn = partial(_compact_groups, shipped, store_uri, store)
    out = df.mapInArrow(fn, RESULT_SCHEMA).collect()
    return [(DataFile.from_json(json.loads(r["file"])), json.loads(r["stat"])) for r in out]


def compact(
    spark: Any,
    uri: str,
    *,
    instant: str | None = None,
    schedule: bool = True,
    options: Mapping[str, str] | None = None,
) -> list[str]:
    """Compact the merge-on-read table at `uri` on Spark's executors; returns the instant times
    of the compactions completed (empty: nothing to compact).

    Without `instant`: the pending compactions nobody is running, oldest first, else (with
    `schedule`) a new plan made now; with `instant`: that scheduled compaction only, also when
    its executor is still heartbeating (a rerun after a failed job). `options`: table settings
    by their Hudi names, as for the writers."""
    conf = conf_of(spark)
    path = table_path(uri)
    settings = store_settings(conf)
    table = Table.open(open_store(path.store_uri, settings), table_settings(conf, options))
    if instant is not None:
        todo = [instant]
    else:
        todo = runnable_compactions(table)
        if not todo and schedule:
            planned = table.maintenance.schedule_compaction()
            todo = [planned] if planned else []
    meta = {ENGINE_KEY: "spark", APP_KEY: str(spark.sparkContext.applicationId)}
    done = []
    for t in todo:
        run = start_compaction(table, t)
        if run is None:
            continue  # completed meanwhile, or its plan no longer fits the table (dropped)
        try:
            written = execute_on_spark(spark, run, path.store_uri, settings)
            got = complete_compaction(run, written, meta)
        except CommitConflict:
            if instant is not None:
                raise
            continue  # something that changed its file groups completed meanwhile: dropped
        except BaseException:
            run.abandon()  # left pending, heartbeat gone: the next run executes it again
            raise
        if got is not None:
            done.append(t)
    return done


__all__ = ["compact", "execute_on_spark"]
