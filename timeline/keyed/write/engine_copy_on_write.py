"""Copy-on-write keyed commits for an engine that distributes them (Spark).

The engine runs the one-process writer's array-level steps (copy_on_write.py) in its tasks,
each task on a shard of the batch that no other task's records can touch:

1. the driver plans (`plan_rewrite`): the table state the write reads and the schema of
   the slices it writes, picklable; a task lists nothing afterwards and reads only the
   index's filters and the files of the keys it looks up, each once, by the one task whose
   shard needs them;
2. each task (`run_rewrite_shard`) builds a `Planner` on the shipped state, prepares its
   records (`prepare_batch`: keys, duplicates combined), locates and decides them, places
   new records (small files of its partitions first, then new file groups) and writes every
   touched file group's new slice (from the bytes `locate` fetched, kept up to
   `write_inflight_bytes`) (named by the task attempt, so a retried attempt never
   overwrites a slice an earlier attempt may have reported);
3. the driver commits the tasks' slices as one `commit` (`commit_rewrite`), sweeping what
   failed attempts left under the instant.

Shards are those of delta commits (engine_delta.shard_columns): a partition of the table
for keys unique per partition, the whole batch for keys unique in the table (a global key
may move between partitions, and a file group's new slice must come from one task).

The record-level index is not read by the tasks (each would read all of it); the range and
bloom index places the keys, and the commit records no index delta, so the record-level
index stops speaking for the groups it rewrote until it is next built (as after a delta
commit; keyed/index/record_index.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...engine_commit import sweep_strays
from ...errors import WriterNotSupported
from ...file_groups.sidecars import WRITE_STATS
from ...instant import Instant
from ...layout import data_key
from ...metadata import DataFile
from ...schema import merge_schemas
from ...settings import TableSettings
from ...snapshot import TableState
from ..index import range_bloom_index
from ..keys import META_COLUMNS, typed_keys, with_meta
from ..properties import MERGE_ON_READ, KeyedProperties
from .copy_on_write import write_rewrites
from .planner import FAIL, Planner, prepare_batch
from .planning import plan_on
from .slice_writer import SliceOut

if TYPE_CHECKING:
    from ...txn import Transaction
    from ..context import KeyedTable


@dataclass(frozen=True)
class RewritePlan:
    """What every task of one distributed copy-on-write commit needs (picklable)."""

    instant_time: str
    props: KeyedProperties
    operation: str  # upsert, insert or delete
    on_duplicate: str
    #: The schema new slices are written in (the table's, merged with the batch's).
    schema: pa.Schema
    #: The table's schema as planned on (deletes' keys are cast to its types).
    table_schema: pa.Schema | None
    state: TableState
    settings: TableSettings

    @property
    def upsert(self) -> bool:
        return self.operation != "delete"


def plan_rewrite(
    table: KeyedTable,
    txn: Transaction,
    props: KeyedProperties,
    incoming: pa.Schema | None,
    operation: str,
    on_duplicate: str = FAIL,
) -> RewritePlan:
    """Plan a copy-on-write commit after `begin` (`incoming`: the batch's columns; None for
    a delete); completions it does not see are validated at commit. A merge-on-read table
    takes `plan_delta_write`: rewriting a group from its base file would drop its logs."""
    if props.table_type == MERGE_ON_READ:
        raise WriterNotSupported(
            f"{table.uri} is a merge_on_read table: plan its write with plan_delta_write "
            "(delta commits), not plan_rewrite, which rewrites file groups from their base files"
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
    return RewritePlan(
        txn.instant_time, props, operation, on_duplicate, target, schema, st, table.settings
    )


@dataclass(frozen=True)
class RewriteShard:
    """What one task wrote: new slices, their write stats, and how many files it read to
    place its keys."""

    files: list[DataFile]
    stats: list[dict[str, Any]]
    files_read: int

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [f.to_json() for f in self.files],
            "stats": self.stats,
            "files_read": self.files_read,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> RewriteShard:
        files = [DataFile.from_json(f) for f in d["files"]]
        return RewriteShard(files, list(d["stats"]), int(d["files_read"]))


def run_rewrite_shard(
    table: KeyedTable, plan: RewritePlan, data: pa.Table, task: str
) -> RewriteShard:
    """Locate, decide and rewrite one shard's records (`data`: the user's columns, in batch
    order) on `table`, a handle on the store that is not loaded (`Table(store,
    plan.settings)`); `task` names the attempt (in the rewritten slices' names)."""
    planner = Planner(
        table, plan.props, plan.state, range_bloom_index,
        keep_located_bytes=plan.settings.write_inflight_bytes,
    )  # fmt: skip
    t = plan.instant_time
    batch = dbatch = None
    if plan.upsert:
        batch = prepare_batch(data, plan.props, t, upsert=True)
    else:
        keys = typed_keys(data, plan.table_schema, plan.props)
        dbatch = prepare_batch(keys, plan.props, t, upsert=False)
    out = SliceOut(t, lambda partition, name: data_key(t, partition, name), plan.schema, task)
    written = write_rewrites(
        planner, out, plan.operation, batch=batch, dbatch=dbatch, on_duplicate=plan.on_duplicate
    )
    files = [f for f, _ in written.slices]
    return RewriteShard(files, [s for _, s in written.slices], planner.files_read)


def commit_rewrite(
    txn: Transaction,
    plan: RewritePlan,
    shards: Sequence[RewriteShard],
    *,
    extra_metadata: Mapping[str, str] | None = None,
) -> Instant:
    """Complete a distributed copy-on-write commit with exactly what `shards` wrote; objects
    under the instant that none of them names (failed task attempts) are deleted first."""
    files = [f for s in shards for f in s.files]
    stats = [st for s in shards for st in s.stats]
    keep = {f.path for f in files}
    keep |= {str(s["bloom_path"]) for s in stats if s.get("bloom_path")}
    try:
        sweep_strays(txn.table.store, txn.instant_time, keep)
        txn.add(*files)
    except BaseException:
        txn.abort()
        raise
    details = {
        WRITE_STATS: sorted(stats, key=lambda s: str(s["file_group"])),
        "keyed": {
            "files_read": sum(s.files_read for s in shards),
            "properties": plan.props.to_json(),
        },
    }
    instant = txn.commit(dict(extra_metadata or {}), details)
    sweep_strays(txn.table.store, txn.instant_time, keep)
    return instant


__all__ = ["RewritePlan", "RewriteShard", "commit_rewrite", "plan_rewrite", "run_rewrite_shard"]
