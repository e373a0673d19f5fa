"""Keyed commits for an engine that distributes them (Spark): one picklable plan, the
one-process writer's array-level steps run by the engine's tasks, one commit.

Each task takes a shard of the batch that no other task's records can touch:

1. the driver plans after `begin` (`plan_engine_write`): the table state the write reads and
   the schema it writes, picklable; a task lists nothing afterwards and reads only the
   index's filters and the files (slices) of the keys it looks up, each once, by the one task
   whose shard needs them;
2. each task (`run_shard`) builds a `Planner` on the shipped state, prepares its records
   (`prepare_batch`: keys, duplicates combined) and runs the writer of the table's type:
   copy-on-write (copy_on_write.py `write_rewrites`: locate, decide, place new records, write
   every touched file group's new slice from the bytes `locate` fetched) or merge-on-read
   (merge_on_read.py `write_deltas`: route, one log object per partition, new file groups).
   What a task writes is named by the task attempt, so a retried attempt never overwrites an
   object an earlier attempt may have reported;
3. the driver commits exactly what the tasks reported (`commit_shards`): a `commit` or a
   `deltacommit`, sweeping what failed attempts left under the instant (no sweep when the
   driver wrote the shards itself: no attempt of a task can have left anything).

What a shard is (whole partitions, or the whole batch) is keyed/write/shards.py's rule:
`shard_columns` names the columns to group by, and an insert of table-wide keys split by
partition has its shards' keys checked against each other (`key_digest`, `digests_overlap`).

On a copy-on-write table the plan carries the record-level index as of the planned state;
tasks look their keys up in it as the one-process writer does, each writes its shard's key
changes, and the commit names one index delta (keyed/write/engine_index.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...engine_commit import sweep_strays
from ...errors import WriterNotSupported
from ...file_groups.log_files import LOG_FILES
from ...file_groups.sidecars import WRITE_STATS
from ...instant import COMMIT, DELTA_COMMIT, Instant
from ...layout import data_key
from ...metadata import DataFile
from ...schema import merge_schemas
from ...settings import TableSettings
from ...snapshot import TableState
from ..index import RECORD_INDEX_DELTA, IndexView, merge_if_due
from ..keys import META_COLUMNS, typed_keys, with_meta
from ..policies import TableType
from ..properties import KeyedProperties
from .copy_on_write import index_changes, write_rewrites
from .engine_index import commit_delta, index_factory, planned_index, write_part
from .merge_on_read import write_deltas
from .planner import FAIL, Batch, Planner, prepare_batch
from .planning import plan_on
from .request import WriteOperation
from .shards import checks_keys_across_shards, digests_overlap, key_digest, shard_columns
from .slice_writer import SliceOut

if TYPE_CHECKING:
    from ...txn import Transaction
    from ..context import KeyedTable


@dataclass(frozen=True)
class EnginePlan:
    """What every task of one distributed keyed commit needs (picklable)."""

    instant_time: str
    props: KeyedProperties
    operation: WriteOperation
    on_duplicate: str
    #: The schema new slices and log blocks are written in (the table's and the batch's).
    schema: pa.Schema
    #: The table's schema as planned on (deletes' keys are cast to its types).
    table_schema: pa.Schema | None
    state: TableState
    settings: TableSettings
    #: The record-level index the write looks keys up in and keeps current (copy-on-write,
    #: once built; None: ranges and blooms, and no delta).
    record_index: IndexView | None = None

    @property
    def upsert(self) -> bool:
        return self.operation != WriteOperation.DELETE

    @property
    def merge_on_read(self) -> bool:
        return self.props.table_type == TableType.MERGE_ON_READ


@dataclass(frozen=True)
class EngineShard:
    """What one task wrote: base files (new slices or new file groups), their write stats,
    log files (merge-on-read; commit metadata's records), and how many files it read."""

    files: list[DataFile]
    stats: list[dict[str, Any]]
    files_read: int
    logs: list[dict[str, Any]] = field(default_factory=list)
    #: Its part of the record-level index's delta (None: the write keeps no index).
    index_delta: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [f.to_json() for f in self.files],
            "stats": self.stats,
            "files_read": self.files_read,
            "logs": self.logs,
            "index_delta": self.index_delta,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> EngineShard:
        files = [DataFile.from_json(f) for f in d["files"]]
        return EngineShard(
            files, list(d["stats"]), int(d["files_read"]), list(d["logs"]), d.get("index_delta")
        )


def plan_engine_write(
    table: KeyedTable,
    txn: Transaction,
    props: KeyedProperties,
    incoming: pa.Schema | None,
    operation: WriteOperation | str,
    on_duplicate: str = FAIL,
) -> EnginePlan:
    """Plan a keyed commit after `begin` (`incoming`: the batch's columns; None for a
    delete); completions it does not see are validated at commit. The instant must be of
    the table type's action: a `deltacommit` on a merge-on-read table (rewriting a group from
    its base file would drop its logs), a `commit` on a copy-on-write table."""
    action = DELTA_COMMIT if props.table_type == TableType.MERGE_ON_READ else COMMIT
    if txn.action != action:
        raise WriterNotSupported(
            f"{table.uri} is a {props.table_type} table: its keyed writes are {action} "
            f"instants, not {txn.action}"
        )
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
    index = planned_index(st)
    op = WriteOperation.parse(operation)
    return EnginePlan(
        txn.instant_time, props, op, on_duplicate, target, schema, st, table.settings, index,
    )  # fmt: skip


def _batches(plan: EnginePlan, data: pa.Table) -> tuple[Batch | None, Batch | None]:
    """The shard's records prepared: upserts (or inserts), or the keys of deletes."""
    t = plan.instant_time
    if plan.upsert:
        return prepare_batch(data, plan.props, t, upsert=True), None
    keys = typed_keys(data, plan.table_schema, plan.props)
    return None, prepare_batch(keys, plan.props, t, upsert=False)


def run_shard(table: KeyedTable, plan: EnginePlan, data: pa.Table, task: str) -> EngineShard:
    """Write one shard's records (`data`: the user's columns, in batch order) on `table`, a
    handle on the store that is not loaded (`Table(store, plan.settings)`); `task` names the
    attempt (in the names of what it writes)."""
    t = plan.instant_time
    batch, dbatch = _batches(plan, data)
    key = lambda partition, name: data_key(t, partition, name)  # noqa: E731
    if plan.merge_on_read:
        planner = Planner(table, plan.props, plan.state, None, merge_on_read=True)
        out = write_deltas(
            planner, plan.props, plan.operation, t, plan.schema, data_key=key, batch=batch,
            dbatch=dbatch, on_duplicate=plan.on_duplicate, object_name=f".{t}.{task}.log",
        )  # fmt: skip
        delta = None
        if plan.record_index is not None:
            delta = write_part(table.store, t, task, out.index_changes, plan.settings)
        return EngineShard(out.files, out.stats, planner.files_read, out.logs, delta)
    planner = Planner(
        table, plan.props, plan.state, index_factory(plan.record_index, plan.settings)
    )
    written = write_rewrites(
        planner, SliceOut(t, key, plan.schema, task), plan.operation,
        batch=batch, dbatch=dbatch, on_duplicate=plan.on_duplicate,
    )  # fmt: skip
    delta = None
    if plan.record_index is not None:
        changes = index_changes(batch, written.groups, written.tombstones)
        delta = write_part(table.store, t, task, changes, plan.settings)
    files = [f for f, _ in written.slices]
    return EngineShard(files, [s for _, s in written.slices], planner.files_read, index_delta=delta)


def commit_shards(
    txn: Transaction,
    plan: EnginePlan,
    shards: Sequence[EngineShard],
    *,
    extra_metadata: Mapping[str, str] | None = None,
    table: KeyedTable | None = None,
    sweep: bool = True,
) -> Instant:
    """Complete the commit with exactly what `shards` wrote. `table`: the keyed table,
    whose record-level index deltas are merged once due, as after a one-process commit.

    `sweep`: engine tasks wrote the shards, so attempts that failed, were retried or ran
    speculatively may have left objects no shard names under the instant; they are found
    by listing its data folder and deleted before the completion and once more after it
    (an attempt still uploading while the completion ran). False when this process wrote
    every shard itself (`run_shard` on the driver): then every object under the instant is
    one the shards name, but for index parts merged into one delta, deleted by name, and
    nothing is listed. (A write that fails before its completion is rolled back by
    `abort`, which lists the folder whoever wrote it.)"""
    logs = [lf for s in shards for lf in s.logs]
    files = [f for s in shards for f in s.files]
    stats = [st for s in shards for st in s.stats]
    keep = {f.path for f in files} | {str(lf["path"]) for lf in logs}
    keep |= {str(s["bloom_path"]) for s in stats if s.get("bloom_path")}
    delta: dict[str, Any] | None = None
    store = txn.table.store
    try:
        if plan.record_index is not None:
            parts = [s.index_delta for s in shards]
            delta = commit_delta(store, txn.instant_time, parts, plan.settings)
            keep |= {str(delta["path"])} if delta.get("path") else set()
            merged = _merged_parts(parts) - keep
            if merged and not sweep:
                store.delete_many(sorted(merged))
        if sweep:
            sweep_strays(store, txn.instant_time, keep)
        txn.add(*files)
    except BaseException:
        txn.abort()
        raise
    details: dict[str, Any] = {WRITE_STATS: sorted(stats, key=lambda s: str(s["file_group"]))}
    if plan.merge_on_read:
        details[LOG_FILES] = logs
    details["keyed"] = {
        "files_read": sum(s.files_read for s in shards),
        "properties": plan.props.to_json(),
    }
    if delta is not None:
        details[RECORD_INDEX_DELTA] = delta
    instant = txn.commit(dict(extra_metadata or {}), details)
    if sweep:
        sweep_strays(store, txn.instant_time, keep)
    if plan.record_index is not None and table is not None:
        merge_if_due(table, len(plan.record_index.deltas) + (1 if delta and delta["rows"] else 0))
    return instant


def _merged_parts(parts: Sequence[dict[str, Any] | None]) -> set[str]:
    """The objects of the shards' index parts (those the commit's delta does not name were
    merged into it)."""
    return {str(p["path"]) for p in parts if p is not None and p.get("path")}


__all__ = [
    "EnginePlan",
    "EngineShard",
    "checks_keys_across_shards",
    "commit_shards",
    "digests_overlap",
    "key_digest",
    "plan_engine_write",
    "run_shard",
    "shard_columns",
]
