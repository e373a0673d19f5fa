"""Keyed writes (upsert, insert, delete) run by Spark with the one-process writer's steps:
copy-on-write commits whose new file slices the executors write, and delta commits of
merge-on-read tables whose log blocks they write, as `Table.upsert` writes them in one
process.

The driver begins the instant (a `commit`, or a `deltacommit` on a merge-on-read table) and
plans it (`timeline.plan_engine_write`: the table state and the schema, small and picklable).
Spark brings the rows into tasks no two of which share a shard (`shard_columns`): when keys
are unique per partition, or for an insert into a partitioned table, a hash repartition by
the table's partition columns (a task may hold several whole partitions; an insert's tasks
return digests of their keys, which the driver checks against each other before the commit,
writing the batch again as one shard on an overlap); when keys are unique in the table, one
task, the input's partitions coalesced in order (no shuffle). An input Spark estimates small
is written on the driver instead (small_input.py). Each task takes its rows as Arrow batches
(`mapInArrow`: no per-group sort, no pandas) and runs the one-process writer's array-level
steps on them once (`timeline.run_shard`: combine duplicates, locate by the index, decide,
place new records, then rewrite the touched file groups or append one log object per
partition). The driver gets one small row per task that had rows (what it wrote) and
commits them (`timeline.commit_shards`, which sweeps what failed or speculative attempts
left under the instant; a shard the driver wrote itself needs no sweep). No task lists the
table; each object is read by the one task whose shard needs it.

The batch's order decides between duplicates of a key under the commit_time merge mode: each
row carries its position (`monotonically_increasing_id`) into the task, which sorts its rows
by it before they are prepared.

A table-wide key runs its write in one task, with what that task's input stage reads: a
costly DataFrame is best cached (or repartitioned) before the write.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from storage import ObjectStore, StoreSettings, open_store
from timeline import (
    META_COLUMNS,
    DuplicateKeys,
    EnginePlan,
    EngineShard,
    KeyedProperties,
    Table,
    checks_keys_across_shards,
    digests_overlap,
    key_digest,
    plan_engine_write,
    run_shard,
    shard_columns,
)

from .direct_scan import NotDirect, ParquetScan, read_scan_table
from .small_input import DRIVER_TASK, driver_input

log = logging.getLogger(__name__)

SEQ = "__flp_seq"
#: One row per task: what it wrote (`EngineShard` as JSON), or the refusal it met, and the
#: digest of its keys when shards are checked against each other.
RESULT_SCHEMA = "shard string, refused string, sample string, keys binary"


@dataclass(frozen=True)
class ShardShipped:
    """What the executors' function carries (pickled with it)."""

    plan: EnginePlan
    store_uri: str
    store: StoreSettings
    user_columns: tuple[str, ...]
    #: Return the digest of the shard's keys (`key_digest`) for the driver's check.
    check_keys: bool = False


def _task_name() -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return f"{ctx.partitionId():05d}-{ctx.taskAttemptId()}" if ctx else "0"


def _shard(
    s: ShardShipped, t: pa.Table, task: str | None = None, store: ObjectStore | None = None
) -> pa.Table:
    """One shard's write, in a task (or on the driver, `task` naming it, through the
    driver's `store` of the table); an insert that meets stored keys is reported, not
    raised, so the driver refuses it with one line."""
    data = t.sort_by(SEQ).select(list(s.user_columns))
    table = Table(store or open_store(s.store_uri, s.store), s.plan.settings)
    digest = key_digest(data, s.plan.props) if s.check_keys else b""
    try:
        out = json.dumps(run_shard(table, s.plan, data, task or _task_name()).to_json())
        refused, sample = "", "[]"
    except DuplicateKeys as exc:
        out, refused, sample = "", str(exc), json.dumps(exc.keys)
    return pa.table(
        {
            "shard": pa.array([out], pa.string()),
            "refused": pa.array([refused], pa.string()),
            "sample": pa.array([sample], pa.string()),
            "keys": pa.array([digest], pa.binary()),
        }
    )


def _mapped(s: ShardShipped) -> Any:
    """`_shard` over all of a task's Arrow batches (none: the task reports nothing)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = list(batches)
        if sum(b.num_rows for b in got):
            yield from _shard(s, pa.Table.from_batches(got)).to_batches()

    return run


def _run(df: Any, shipped: ShardShipped, by: list[str]) -> list[Any]:
    """The shards' tasks: whole partitions of `by` per task, or (none) the input's
    partitions, in order, coalesced into one task; one result row per task with rows."""
    from pyspark.sql import functions as F

    src = df.select(*shipped.user_columns).withColumn(SEQ, F.monotonically_increasing_id())
    if by:  # whole partitions per task: as many tasks as the (sized) shuffle has, at
        # least one per core (an input read as one split still spreads over the cores)
        spark = df.sparkSession
        width = int(spark.conf.get("spark.sql.shuffle.partitions"))
        src = src.repartition(max(width, spark.sparkContext.defaultParallelism), *by)
    else:
        src = src.coalesce(1)
    return list(src.mapInArrow(_mapped(shipped), RESULT_SCHEMA).collect())


def _scan_reader(
    scan: ParquetScan | None, store: StoreSettings, user: tuple[str, ...]
) -> Callable[[], pa.Table | None] | None:
    """Reads a small input from its Parquet files (None: a file is not what Spark reads)."""
    if scan is None:
        return None

    def read() -> pa.Table | None:
        try:
            return read_scan_table(scan, store).select(list(user))
        except NotDirect as exc:
            log.info("flowledger: keyed write through Spark's rows: %s", exc)
            return None

    return read


@dataclass(frozen=True)
class Written:
    """What a keyed write's shards wrote, for the driver to commit (`commit_shards`)."""

    plan: EnginePlan
    shards: list[EngineShard]
    #: Spark's tasks wrote the shards (attempts that failed, were retried or ran
    #: speculatively may have left objects under the instant: the commit sweeps them);
    #: False: the driver wrote the one shard itself, and nothing else can have.
    by_tasks: bool


def plan_and_write(
    df: Any, table: Table, txn: Any, props: KeyedProperties, operation: str,
    on_duplicate: str, store_uri: str, store: StoreSettings, incoming: pa.Schema | None,
    scan: ParquetScan | None = None,
) -> Written:  # fmt: skip
    """Plan the commit on the driver (a delta commit on a merge-on-read table) and run its
    shards on Spark (a small input on the driver, small_input.py: read from its Parquet
    files when `scan` names them, direct_scan.py); returns what they wrote (the caller
    commits or aborts)."""
    plan = plan_engine_write(table, txn, props, incoming, operation, on_duplicate)
    user = tuple(c for c in df.columns if c not in META_COLUMNS)
    shipped = ShardShipped(plan, store_uri, store, user)
    small = driver_input(df.select(*user), SEQ, _scan_reader(scan, store, user))
    by_tasks = small is None
    if small is not None:  # one shard, written right here: no job, no Python worker
        rows = _shard(shipped, small, DRIVER_TASK, table.store).to_pylist()
    else:
        by = [c for c in shard_columns(props, operation) if c in user]
        check = checks_keys_across_shards(props, operation) and bool(by)
        rows = _run(df, replace(shipped, check_keys=check), by)
        if check and digests_overlap([r["keys"] for r in rows if not r["refused"]]):
            # one key in two partitions of the batch: written again as one shard, whose
            # duplicates are combined as in one process (the first run's objects are swept)
            rows = _run(df, shipped, [])
    refused = [r for r in rows if r["refused"]]
    if refused:
        raise DuplicateKeys(refused[0]["refused"], json.loads(refused[0]["sample"]))
    shards = [EngineShard.from_json(json.loads(r["shard"])) for r in rows]
    return Written(plan, shards, by_tasks)


__all__ = ["ShardShipped", "Written", "plan_and_write"]
