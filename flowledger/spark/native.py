"""`flowledger.spark.write`: Spark's JVM Parquet writer, committed by the timeline.

1. Open the instant (requested + inflight) on the driver; its data prefix is fresh.
2. `df.write.parquet(<table>/data/<instant>)`: Spark's own writer, straight into that prefix
   (no staging folder of ours: visibility comes from the timeline, not from a rename).
3. List ONLY that prefix (the job's own output folder, never a table data folder), drop Spark's
   bookkeeping objects (_SUCCESS, .crc), read each file's footer (rows, stats) in parallel.
4. Complete the instant with exactly those files; then run the commit hooks.
Any failure before 4 aborts the instant (its prefix is deleted); a killed driver leaves a
pending instant that the next write rolls back (see docs/spark.md, "Failure cases").
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from storage import ObjectInfo, ObjectStore, open_store
from timeline import DataFile, Table, crash
from timeline.layout import data_prefix
from timeline.table_schema import check_schema, latest_schema

from .commit_info import CommitHook, CommitInfo
from .committing import (
    commit_info,
    extra_metadata,
    job_info,
    partition_columns,
    plan_write,
    run_hooks,
)
from .conf import conf_of, store_settings, table_settings
from .errors import SparkWriteError
from .footers import describe
from .paths import resolve_repo_uri, table_path

#: Spark drops partition columns from the files it writes; partitioning by a copy of each
#: column (directories `__flp_<col>=<value>`) keeps the files self-contained, so DuckDB,
#: pyarrow and Spark read the same columns from the committed file list.
PART_PREFIX = "__flp_"


def _sanitize(value: str) -> str:
    # The same partition naming as timeline's own writer (parquet_io.split_partitions).
    return "".join(c if c.isalnum() or c in "-_.:" else "_" for c in value) or "_"


def partition_of(rel_key: str) -> str:
    """`__flp_a=1/__flp_b=x/part-0.parquet` -> `a=1/b=x` (flowledger's partition path)."""
    parts = []
    for d in rel_key.split("/")[:-1]:
        name, _, value = d.partition("=")
        parts.append(f"{name.removeprefix(PART_PREFIX)}={_sanitize(unquote(value))}")
    return "/".join(parts)


def is_data_file(rel_key: str) -> bool:
    base = posixpath.basename(rel_key)
    return (
        base.endswith(".parquet")
        and not base.startswith((".", "_"))
        and ("_temporary/" not in rel_key)
    )


def collect_written(store: ObjectStore, prefix: str) -> list[ObjectInfo]:
    """The data files Spark wrote under `prefix`; its other objects are deleted."""
    # s3a may leave directory markers ("<dir>/", zero bytes): not files, not valid keys to
    # delete through the store; they are harmless under the instant's own prefix.
    objects = [o for o in store.list(prefix) if not o.key.endswith("/")]
    data = [o for o in objects if is_data_file(o.key[len(prefix) :])]
    store.delete_many([o.key for o in objects if o not in data])
    return data


def arrow_schema(spark_schema: Any) -> Any:
    """The Arrow schema of a Spark schema as the table records it: every column nullable, as
    Spark's Parquet writer makes them (so both write paths record the same schema)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(spark_schema, timezone="UTC", prefers_large_types=False)
    return pa.schema([f.with_nullable(True) for f in arrow])


def write(
    df: Any,
    uri: str,
    mode: str = "append",
    partition_by: Sequence[str] | str | None = None,
    *,
    hooks: Sequence[CommitHook] | None = None,
) -> CommitInfo:
    """Write `df` with Spark's Parquet writer as one commit (append) or replacecommit.

    `hooks`: what runs after the commit; default every registered hook (the provenance
    recorder among them). A job that records its own, richer provenance for the files (the
    pipeline's sessions keep each file's bytes for replay) passes `hooks=()`."""
    parts = partition_columns(partition_by)
    missing = [c for c in parts if c not in df.columns]
    if missing:
        raise SparkWriteError(f"partition column(s) {missing} not in the DataFrame {df.columns}")
    try:
        action, operation = plan_write(mode, parts)
    except ValueError as exc:
        raise SparkWriteError(str(exc)) from exc
    spark = df.sparkSession
    conf = conf_of(spark)
    path = table_path(uri)
    store = open_store(path.store_uri, store_settings(conf))
    table = Table.open(store, table_settings(conf))
    job = job_info(spark, df)  # inputs are known before the write runs
    txn = table.begin(action, operation=operation)
    try:
        # Fail before any file is written if the DataFrame does not fit the table's schema.
        txn.schema = check_schema(latest_schema(table, refresh=False), arrow_schema(df.schema))
        prefix = data_prefix(txn.instant_time)
        out = df
        writer_cols = [PART_PREFIX + c for c in parts]
        if parts:
            from pyspark.sql import functions as F

            out = df.select(
                "*", *[F.col(c).alias(a) for c, a in zip(parts, writer_cols, strict=True)]
            )
        w = out.write.mode("errorifexists")
        if parts:
            w = w.partitionBy(*writer_cols)
        started = time.perf_counter()
        w.parquet(path.spark_file(prefix.rstrip("/")))
        spark_s = time.perf_counter() - started
        crash.point("spark.written")
        written = collect_written(store, prefix)
        files = [
            DataFile(
                f.key,
                f.size,
                f.rows,
                partition_of(f.key[len(prefix) :]),
                column_stats=f.column_stats,
                checksum=f.checksum,
            )
            for f in describe(store, written)
        ]
        txn.add(*files)
        if mode == "overwrite":
            touched = {f.partition for f in files}
            current = {f.partition for f in table.snapshot().files}
            txn.replace_partitions(touched if parts else current | touched)
    except BaseException:
        txn.abort()
        raise
    # Not inside the abort above: a conflict rolls the instant back itself, and an unknown
    # outcome (the log PUT may have landed) must stay pending for recovery to decide.
    instant = txn.commit(extra_metadata(job))
    info = commit_info(path, instant, operation, files, job, resolve_repo_uri(None, conf))
    # Reported for benchmarks: what the driver's flowledger store did for this commit (the
    # Spark job's own s3a requests are in the JVM) and how long the job and the commit took.
    info = replace(
        info,
        extra={
            "requests": " ".join(f"{k}={v}" for k, v in sorted(store.stats.snapshot().items())),
            "spark_s": f"{spark_s:.3f}",
            "commit_s": f"{time.perf_counter() - started - spark_s:.3f}",
        },
    )
    run_hooks(info, hooks)
    return info
