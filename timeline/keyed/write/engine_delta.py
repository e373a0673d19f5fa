"""Delta commits of merge-on-read tables for an engine that distributes them (Spark).

The engine runs the one-process writer's array-level steps (merge_on_read.py) in its tasks,
each task on a shard of the batch that no other task's records can touch:

1. the driver plans (`plan_delta_write`): the table state the write reads and the schema
   of what it writes, picklable; nothing is listed or read by a task afterwards except the
   index's filters and the slices of the keys the index cannot place, each once, by the one
   task whose shard needs them;
2. each task (`run_delta_shard`) builds a `Planner` on the shipped state, prepares its
   records (`prepare_batch`: keys, duplicates combined), routes them, writes one log object
   per partition it touches (named by the task, so a retried attempt never overwrites one
   an earlier attempt may have reported) and the new file groups of its new keys;
3. the driver commits the tasks' log files and files as one `deltacommit`
   (`commit_delta`), sweeping what failed attempts left under the instant.

A shard is a partition of the table for keys unique per partition, and the whole batch for
keys unique in the table (a global key may move between partitions, and a file group's log
block must come from one task): `shard_columns` names the columns to group by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...engine_commit import sweep_strays
from ...file_groups.log_files import LOG_FILES
from ...file_groups.sidecars import WRITE_STATS
from ...instant import Instant
from ...layout import data_key
from ...metadata import DataFile
from ...schema import merge_schemas
from ...settings import TableSettings
from ...snapshot import TableState
from ..keys import META_COLUMNS, typed_keys, with_meta
from ..properties import GLOBAL, KeyedProperties
from .merge_on_read import DeltaOutput, write_deltas
from .planner import FAIL, Planner, prepare_batch
from .planning import plan_on

if TYPE_CHECKING:
    from ...txn import Transaction
    from ..context import KeyedTable


@dataclass(frozen=True)
class DeltaWritePlan:
    """What every task of one distributed delta commit needs (picklable)."""

    instant_time: str
    props: KeyedProperties
    operation: str  # upsert, insert or delete
    on_duplicate: str
    #: The schema log blocks and new base files are written in (the table's and the batch's).
    schema: pa.Schema
    #: The table's schema as planned on (deletes' keys are cast to its types).
    table_schema: pa.Schema | None
    state: TableState
    settings: TableSettings

    @property
    def upsert(self) -> bool:
        return self.operation != "delete"


def shard_columns(props: KeyedProperties) -> tuple[str, ...]:
    """The columns whose values split a batch into shards no two tasks share (none: one
    shard)."""
    return () if props.key_scope == GLOBAL else tuple(props.partition_by)


def plan_delta_write(
    table: KeyedTable,
    txn: Transaction,
    props: KeyedProperties,
    incoming: pa.Schema | None,
    operation: str,
    on_duplicate: str = FAIL,
) -> DeltaWritePlan:
    """Plan a delta commit after `begin` (`incoming`: the batch's columns; None for a
    delete); completions it does not see are validated at commit."""
    st = table.state()
    plan_on(txn, st)
    schema = st.schema()
    target = schema
    if incoming is not None:
        body = pa.schema([f for f in incoming if f.name not in META_COLUMNS])
        metas = with_meta(body.empty_table(), txn.instant_time, []).schema
        target = merge_schemas(schema, metas, table.uri)
    if target is None:
        raise ValueError(f"{table.uri}: a keyed table states its meta columns at creation")
    txn.schema = target
    return DeltaWritePlan(
        txn.instant_time, props, operation, on_duplicate, target, schema, st, table.settings
    )


@dataclass(frozen=True)
class DeltaShard:
    """What one task wrote: log files (commit metadata's records), base files, their write
    stats, and how many slices it read to place its keys."""

    logs: list[dict[str, Any]]
    files: list[DataFile]
    stats: list[dict[str, Any]]
    files_read: int

    def to_json(self) -> dict[str, Any]:
        return {
            "logs": self.logs,
            "files": [f.to_json() for f in self.files],
            "stats": self.stats,
            "files_read": self.files_read,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> DeltaShard:
        files = [DataFile.from_json(f) for f in d["files"]]
        return DeltaShard(list(d["logs"]), files, list(d["stats"]), int(d["files_read"]))


def run_delta_shard(
    table: KeyedTable, plan: DeltaWritePlan, data: pa.Table, task: str
) -> DeltaShard:
    """Route and write one shard's records (`data`: the user's columns, in batch order) on
    `table`, a handle on the store that is not loaded (`Table(store, plan.settings)`)."""
    planner = Planner(table, plan.props, plan.state, None, merge_on_read=True)
    t = plan.instant_time
    batch = dbatch = None
    if plan.upsert:
        batch = prepare_batch(data, plan.props, t, upsert=True)
    else:
        keys = typed_keys(data, plan.table_schema, plan.props)
        dbatch = prepare_batch(keys, plan.props, t, upsert=False)
    out: DeltaOutput = write_deltas(
        planner, plan.props, plan.operation, t, plan.schema,
        data_key=lambda partition, name: data_key(t, partition, name),
        batch=batch, dbatch=dbatch, on_duplicate=plan.on_duplicate,
        object_name=f".{t}.{task}.log",
    )  # fmt: skip
    return DeltaShard(out.logs, out.files, out.stats, planner.files_read)


def commit_delta(
    txn: Transaction,
    plan: DeltaWritePlan,
    shards: Sequence[DeltaShard],
    *,
    extra_metadata: Mapping[str, str] | None = None,
) -> Instant:
    """Complete a distributed delta commit with exactly what `shards` wrote; objects under
    the instant that none of them names (failed task attempts) are deleted first."""
    logs = [lf for s in shards for lf in s.logs]
    files = [f for s in shards for f in s.files]
    stats = [st for s in shards for st in s.stats]
    keep = {f.path for f in files} | {str(lf["path"]) for lf in logs}
    keep |= {str(s["bloom_path"]) for s in stats if s.get("bloom_path")}
    try:
        sweep_strays(txn.table.store, txn.instant_time, keep)
        txn.add(*files)
    except BaseException:
        txn.abort()
        raise
    details = {
        WRITE_STATS: sorted(stats, key=lambda s: str(s["file_group"])),
        LOG_FILES: logs,
        "keyed": {
            "files_read": sum(s.files_read for s in shards),
            "properties": plan.props.to_json(),
        },
    }
    instant = txn.commit(dict(extra_metadata or {}), details)
    sweep_strays(txn.table.store, txn.instant_time, keep)
    return instant


__all__ = [
    "DeltaShard",
    "DeltaWritePlan",
    "commit_delta",
    "plan_delta_write",
    "run_delta_shard",
    "shard_columns",
]
