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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from storage import ObjectInfo, ObjectStore, open_store
from timeline import (
    NULL_PARTITION,
    RECORD_KEY_COL,
    DataFile,
    Table,
    check_schema,
    commit_files,
    crash_point,
    data_prefix,
    describe_files,
    latest_schema,
    partition_from_stats,
    partition_path,
)

from .arrow import arrow_schema
from .commit_info import CommitHook, CommitInfo, commit_hooks
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
from .keyed_options import keyed_options, requested_properties
from .paths import resolve_repo_uri, table_path

#: Spark drops partition columns from the files it writes; partitioning by a copy of each
#: column (directories `__flp_<col>=<value>`) keeps the files self-contained, so DuckDB,
#: pyarrow and Spark read the same columns from the committed file list.
PART_PREFIX = "__flp_"


def partition_of(rel_key: str, naming: str) -> str:
    """`__flp_a=1/__flp_b=x/part-0.parquet` -> `a=1/b=x`: the partition named from Spark's
    directory names (values as Spark prints them, unescaped from Spark's `%XX`), in the
    table's `naming`. Used only where the file's statistics cannot name it (see
    `file_partition`)."""
    values: list[tuple[str, str | None]] = []
    for d in rel_key.split("/")[:-1]:
        name, _, value = d.partition("=")
        text = unquote(value)
        column = unquote(name).removeprefix(PART_PREFIX)
        values.append((column, None if text == NULL_PARTITION else text))
    return partition_path(values, naming=naming)


def file_partition(parts: Sequence[str], f: DataFile, rel_key: str, naming: str) -> str:
    """A Spark-written file's partition, named by timeline's partition naming from the typed
    values in the file's footer (a partition column's min equals its max), so it is the name
    the Python writers give the same rows (Spark prints `true`, a timestamp in the session's
    zone...); Spark's directory names when the statistics cannot tell."""
    if not parts:
        return ""
    named = partition_from_stats(parts, f.column_stats, f.rows, naming=naming)
    return named if named is not None else partition_of(rel_key, naming)


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


def write(
    df: Any,
    uri: str,
    mode: str = "append",
    partition_by: Sequence[str] | str | None = None,
    *,
    hooks: Sequence[CommitHook] | None = None,
    options: Mapping[str, str] | None = None,
) -> CommitInfo:
    """Write `df` with Spark's Parquet writer as one commit (append) or replacecommit.

    `hooks`: what runs after the commit; default every hook installed on the DataFrame's
    session (the provenance recorder among them). A job that records its own, richer
    provenance for the files (the pipeline's sessions keep each file's bytes for replay)
    passes `hooks=()`.
    `options`: a keyed write's options, as the data source takes them (`operation`:
    upsert, insert or delete; `recordKey`, `orderingField`, ... or Hudi's names; see
    docs/spark.md, "Keyed tables"); an append to a keyed table is an upsert."""
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    if partition_by is not None and "partitionBy" not in opts:
        opts["partitionBy"] = ",".join(partition_columns(partition_by))
    if keyed_options(opts) is not None or requested_properties(opts) is not None:
        from .keyed_writers import write_keyed

        return write_keyed(df, uri, mode, opts, hooks)
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
    current = latest_schema(table, refresh=False)
    if current is not None and RECORD_KEY_COL in current.names:
        if mode != "append":
            # Spark's Parquet files carry no record keys: the commit would refuse them after
            # the job wrote them all. Refused before anything is written.
            raise SparkWriteError(
                f"{path.given} is a keyed table: Spark writes keyed changes as upsert, insert "
                "or delete (options={'operation': ...}); replace its partitions with "
                "Table.write(data, mode='overwrite') or `flowledger table write --mode "
                "overwrite`"
            )
        from .keyed_writers import write_keyed  # Hudi's default operation on a keyed table

        return write_keyed(df, uri, mode, {**opts, "operation": "upsert"}, hooks)
    job = job_info(spark, df)  # inputs are known before the write runs
    naming = table.partition_naming() if parts else ""
    txn = table.begin(action, operation=operation)
    try:
        # Fail before any file is written if the DataFrame does not fit the table's schema.
        txn.schema = check_schema(current, arrow_schema(df.schema))
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
        crash_point("spark.written")
        # The add actions: each file Spark wrote, described from its footer and checksum.
        files = [
            replace(f, partition=file_partition(parts, f, f.path[len(prefix) :], naming))
            for f in describe_files(store, collect_written(store, prefix))
        ]
    except BaseException:
        txn.abort()
        raise
    instant = commit_files(txn, files, extra_metadata=extra_metadata(job))
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
    run_hooks(info, commit_hooks(df.sparkSession) if hooks is None else hooks)
    return info
