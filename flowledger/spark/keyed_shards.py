"""Keyed writes (upsert, insert, delete) run by Spark with the one-process writer's steps:
copy-on-write commits whose new file slices the executors write, and delta commits of
merge-on-read tables whose log blocks they write, as `Table.upsert` writes them in one
process.

The driver begins the instant (a `commit`, or a `deltacommit` on a merge-on-read table) and
plans it (`timeline.plan_engine_write`: the table state and the schema, small and picklable).
Spark groups the rows into shards no two tasks share (by the table's partition columns when
keys are unique per partition, else one shard; `shard_columns`) and each task runs the
one-process writer's array-level steps on its shard (`timeline.run_shard`: combine
duplicates, locate by the index, decide, place new records, then rewrite the touched file
groups or append one log object per partition). The driver gets one small row per task
(what it wrote) and commits them (`timeline.commit_shards`). No task lists the table; each
object is read by the one task whose shard needs it.

The batch's order decides between duplicates of a key under the commit_time merge mode: each
row carries its position (`monotonically_increasing_id`) through the shuffle and a shard is
sorted by it before it is prepared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from storage import StoreSettings, open_store
from timeline import (
    META_COLUMNS,
    DuplicateKeys,
    EnginePlan,
    EngineShard,
    KeyedProperties,
    Table,
    plan_engine_write,
    run_shard,
    shard_columns,
)

SEQ, SHARD = "__flp_seq", "__flp_shard"
#: One row per task: what it wrote (`EngineShard` as JSON), or the refusal it met.
RESULT_SCHEMA = "shard string, refused string, sample string"


@dataclass(frozen=True)
class ShardShipped:
    """What the executors' function carries (pickled with it)."""

    plan: EnginePlan
    store_uri: str
    store: StoreSettings
    user_columns: tuple[str, ...]


def _task_name() -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return f"{ctx.partitionId():05d}-{ctx.taskAttemptId()}" if ctx else "0"


def _shard(s: ShardShipped, t: pa.Table) -> pa.Table:
    """One shard's write, in a task; an insert that meets stored keys is reported, not
    raised, so the driver refuses it with one line."""
    data = t.sort_by(SEQ).select(list(s.user_columns))
    table = Table(open_store(s.store_uri, s.store), s.plan.settings)
    try:
        out = json.dumps(run_shard(table, s.plan, data, _task_name()).to_json())
        refused, sample = "", "[]"
    except DuplicateKeys as exc:
        out, refused, sample = "", str(exc), json.dumps(exc.keys)
    return pa.table(
        {
            "shard": pa.array([out], pa.string()),
            "refused": pa.array([refused], pa.string()),
            "sample": pa.array([sample], pa.string()),
        }
    )


def _grouped(s: ShardShipped) -> Any:
    """`_shard` as a function of one Arrow table, type-hinted (PySpark infers a grouped
    Arrow function's kind from its hints)."""

    def run(t: pa.Table) -> pa.Table:
        return _shard(s, t)

    return run


def plan_and_write(
    df: Any, table: Table, txn: Any, props: KeyedProperties, operation: str,
    on_duplicate: str, store_uri: str, store: StoreSettings, incoming: pa.Schema | None,
) -> tuple[EnginePlan, list[EngineShard]]:  # fmt: skip
    """Plan the commit on the driver (a delta commit on a merge-on-read table) and run its
    shards on Spark; returns what the tasks wrote (the caller commits or aborts)."""
    from pyspark.sql import functions as F

    plan = plan_engine_write(table, txn, props, incoming, operation, on_duplicate)
    user = tuple(c for c in df.columns if c not in META_COLUMNS)
    shipped = ShardShipped(plan, store_uri, store, user)
    src = df.select(*user).withColumn(SEQ, F.monotonically_increasing_id())
    by = [c for c in shard_columns(props) if c in user]
    if not by:  # one shard (Spark takes a literal in groupBy for a column's ordinal)
        src, by = src.withColumn(SHARD, F.lit(0)), [SHARD]
    rows = src.groupBy(*by).applyInArrow(_grouped(shipped), RESULT_SCHEMA).collect()
    refused = [r for r in rows if r["refused"]]
    if refused:
        raise DuplicateKeys(refused[0]["refused"], json.loads(refused[0]["sample"]))
    return plan, [EngineShard.from_json(json.loads(r["shard"])) for r in rows]


__all__ = ["ShardShipped", "plan_and_write"]
