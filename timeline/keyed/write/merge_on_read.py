"""Delta commits of merge-on-read tables: insert, upsert and delete as one `deltacommit`
that appends a log block to each touched file group instead of rewriting its base file.

One write, after `begin`:
1. the batch's duplicate records are combined by the merge mode (keyed/write/planner.py);
2. each record is routed by the index without reading slices (keyed/write/routing.py): a key the
   index places in exactly one file group goes into that group's log block, update or
   insert alike; a key in no group goes into new base files (new file groups, placed as
   copy-on-write places inserts); only the candidates of a key in several groups are read;
3. each touched group gets one log block, cut from the batch's arrays (take by group):
   upserts whole, deletes as key and ordering value. The block records the rule a reader
   applies it by (keyed/read/merge.py): under the event_time merge mode its entries are compared
   by ordering value at read time, against the merged state before them; a delete by keys
   alone wins unconditionally;
4. the block's log file records the key range of its upserts and a bloom filter of those
   its base's range and bloom may not name, so the index finds a key inserted into a log
   again (keyed/index/merge_on_read.py);
5. the blocks of one partition are PUT as one log object (keyed/log/objects.py): a delta commit
   makes one PUT per partition it touches, not one per file group;
6. with a record-level index built, the commit records its key changes as copy-on-write does
   (`delta_index_changes`): keys inserted into a group's log or into a new group, keys deleted.

Delta commits touching one file group conflict (the timeline's file-group rule counts log
files); a compaction never conflicts with them (slices.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import crash
from ...file_groups import FileSlice
from ...file_groups.log_files import LOG_FILES
from ...file_groups.sidecars import WRITE_STATS
from ...instant import DELTA_COMMIT
from ...metadata import DataFile
from ...schema import conform
from ..index import (
    RECORD_INDEX_DELTA,
    KeyIndex,
    RecordLevelIndex,
    SliceIndex,
    log_key_stats,
    range_bloom_index,
    write_delta,
)
from ..keys import COMMIT_TIME_COL, RECORD_KEY_COL
from ..log import DELETE, OP_COL, UPSERT, Block, encode, log_object_name, write_log_object
from ..policies import MergeMode
from ..properties import KeyedProperties
from .copy_on_write import Group, place_inserts, write_group_at
from .decide import Replaced, decide_filter
from .planner import FAIL, Batch, Planner
from .planning import Filter
from .routing import route_deletes, route_upserts

if TYPE_CHECKING:
    from .request import PreparedWrite


@dataclass
class _Delta:
    """What one file group's log block of this write holds."""

    sl: FileSlice
    upserts: list[np.ndarray] = field(default_factory=list)  # batch rows
    delete_keys: list[pa.Array] = field(default_factory=list)  # record keys
    delete_order: list[pa.Array | None] = field(default_factory=list)  # their ordering values


class _Deltas:
    """The log blocks one delta commit writes, by file group."""

    def __init__(self, plan: Planner) -> None:
        self.plan = plan
        self.groups: dict[str, _Delta] = {}

    def mark(self, r: Replaced) -> None:
        assert self.plan.slices is not None
        for k, sel in r.by_file():
            sl = self.plan.slices[self.plan.files[k].group]
            d = self.groups.get(sl.group)
            if d is None:
                d = self.groups[sl.group] = _Delta(sl)
            new = r.new[sel]
            if (new >= 0).any():
                d.upserts.append(new[new >= 0])
            gone = pa.array(sel[new < 0], pa.int64())
            if len(gone):  # deleted, or a global key moved away from this partition
                d.delete_keys.append(r.keys.take(gone))
                d.delete_order.append(r.ordering.take(gone) if r.ordering is not None else None)


def _block(
    d: _Delta, incoming: pa.Table | None, schema: pa.Schema, props: KeyedProperties, t: str
) -> pa.Table:
    pieces = []
    if d.upserts and incoming is not None:
        up = conform(incoming.take(pa.array(np.concatenate(d.upserts), pa.int64())), schema)
        pieces.append(up.append_column(OP_COL, pa.repeat(pa.scalar(UPSERT), up.num_rows)))
    if d.delete_keys:
        n = sum(len(k) for k in d.delete_keys)
        order = props.ordering_field
        cols: dict[str, pa.Array] = {RECORD_KEY_COL: pa.concat_arrays(d.delete_keys)}
        if order and order in schema.names:
            typ = schema.field(order).type
            cols[order] = pa.concat_arrays(
                [
                    v.cast(typ) if v is not None else pa.nulls(len(k), typ)
                    for k, v in zip(d.delete_keys, d.delete_order, strict=True)
                ]
            )
        dl = pa.table(cols)
        # a key deleted twice in one write: its last entry stands; sorted by key
        dl = dl.append_column("__at", pa.array(np.arange(n, dtype=np.int64)))
        last = dl.group_by(RECORD_KEY_COL).aggregate([("__at", "max")]).column("__at_max")
        dl = dl.take(last).sort_by(RECORD_KEY_COL).drop_columns(["__at"])
        dl = dl.append_column(COMMIT_TIME_COL, pa.repeat(pa.scalar(t), dl.num_rows))
        dl = conform(dl, schema)
        pieces.append(dl.append_column(OP_COL, pa.repeat(pa.scalar(DELETE), dl.num_rows)))
    return pa.concat_tables(pieces, promote_options="default")


@dataclass
class _Routed:
    """A delta commit's batch routed to file groups: the log blocks to write and the new
    file groups to place inserts in."""

    plan: Planner
    schema: pa.Schema
    rows: pa.Table | None  # the incoming (prepared) rows, upserts and inserts
    keys: pa.Array | None  # their record keys
    deltas: _Deltas
    new_groups: list[Group]
    ordered_deletes: bool  # False: deletes by keys alone, which win


def _route(
    plan: Planner,
    schema: pa.Schema,
    operation: str,
    batch: Batch | None,
    dbatch: Batch | None,
    where: Filter | None,
    on_duplicate: str,
) -> _Routed:
    """Step 2: each prepared record routed to a log block or a new file group, deletes (by
    key or filter) to the blocks of the groups holding them."""
    deltas = _Deltas(plan)
    new_groups: list[Group] = []
    if batch is not None:
        upserts = route_upserts(plan, batch, operation, on_duplicate)
        deltas.mark(upserts.replaced)
        new_groups = place_inserts(plan, upserts.inserts)
    ordered_deletes = True
    if dbatch is not None:
        ordered_deletes = dbatch.ordering is not None  # by keys alone: deletes win
        deltas.mark(route_deletes(plan, dbatch))
    if where is not None:
        deltas.mark(decide_filter(plan, where))
    rows, keys = (batch.rows, batch.keys) if batch is not None else (None, None)
    return _Routed(plan, schema, rows, keys, deltas, new_groups, ordered_deletes)


@dataclass(frozen=True)
class _Target:
    """Where a delta write puts its objects: under instant `t`, at `data_key(partition,
    name)`, log objects named `object_name` (a task names its own so that a retried attempt
    never overwrites one an earlier attempt may have reported)."""

    t: str
    data_key: Callable[[str, str], str]
    object_name: str


class _LogWriter:
    """Steps 3 to 5: each touched group's block encoded with its key stats, and one log
    object PUT per partition, a few at a time."""

    def __init__(self, props: KeyedProperties, r: _Routed, to: _Target) -> None:
        self.props, self.r, self.to = props, r, to
        self.table = r.plan.table
        schema, order = r.schema, props.ordering_field
        self.key_from = props.record_key[0] if len(props.record_key) == 1 else None
        self.merge_by = (
            order
            if order and props.merge_mode == MergeMode.EVENT_TIME and order in schema.names
            else ""
        )
        self.int_key = None  # a single integer key: its range is compared as numbers
        kf = self.key_from
        if kf and kf in schema.names and pa.types.is_integer(schema.field(kf).type):
            self.int_key = kf
        self.router = r.plan.index if isinstance(r.plan.index, SliceIndex) else None
        self.canonical: list[KeyIndex] = []  # built when the router's index is not the default
        #: Groups whose keys the record-level index placed: every key upserted into such a
        #: group was already in it (named by its base's or an earlier log's range and bloom),
        #: so its block indexes no key beyond the base and needs no base filter fetched.
        self.placed = _placed_by_index(r.plan)

    def named_by_base(self, base: DataFile, keys: pa.Array) -> pa.Array:
        """Whether the base's recorded range and bloom (as every later lookup reads them)
        name each key: the router's answer when it had the default index."""
        named = self.router.named_by_base(base, keys) if self.router is not None else None
        if named is not None:
            return named
        if not self.canonical:
            index = range_bloom_index(self.table.store, self.r.plan.st, self.props)
            self.canonical.append(index)
        hits = self.canonical[0].candidates([base], keys.to_pylist()).get(base.path, [])
        mask = np.zeros(len(keys), dtype=bool)
        mask[np.asarray(hits, dtype=np.int64)] = True
        return pa.array(mask)

    def key_stats(self, d: _Delta) -> dict[str, Any]:
        rows, keys = self.r.rows, self.r.keys
        if rows is None or keys is None or not d.upserts:
            return {}
        idx = pa.array(np.concatenate(d.upserts), pa.int64())
        ints = rows.column(self.int_key).take(idx).combine_chunks() if self.int_key else None
        picked = keys.take(idx)
        fpp = self.r.plan.bloom_fpp
        if self.placed(d.sl.group):
            return log_key_stats(picked, fpp, ints, base=d.sl.base.path)
        beyond = pc.invert(self.named_by_base(d.sl.base, picked))
        return log_key_stats(picked, fpp, ints, base=d.sl.base.path, beyond=beyond)

    def block(self, group: str) -> Block:
        d, t = self.r.deltas.groups[group], self.to.t
        rows = _block(d, self.r.rows, self.r.schema, self.props, t)
        return encode(rows, group, t, key_stats=self.key_stats(d))

    def put(self, part: tuple[str, list[Block]]) -> list[dict[str, Any]]:
        partition, blocks = part
        t = self.to.t
        lfs = write_log_object(
            self.table.store,
            self.to.data_key(partition, self.to.object_name or log_object_name(t)),
            blocks,
            instant=t,
            partition=partition,
            key_from=self.key_from,
            merge_by=self.merge_by,
            ordered_deletes=self.r.ordered_deletes,
        )
        crash.point(f"{DELTA_COMMIT}.log_written")
        return [lf.to_json() for lf in lfs]

    def write(self) -> list[dict[str, Any]]:
        """The log files written, as the commit records them."""
        deltas = self.r.deltas
        groups = sorted(deltas.groups)
        logs: list[dict[str, Any]] = []
        if not groups:
            return logs
        width = self.table.settings.log_write_parallelism
        with ThreadPoolExecutor(max(1, min(width, len(groups))), "flowledger-log-write") as pool:
            by_partition: dict[str, list[Block]] = {}
            for g, b in zip(groups, pool.map(self.block, groups), strict=True):
                by_partition.setdefault(deltas.groups[g].sl.partition, []).append(b)
            for part in pool.map(self.put, sorted(by_partition.items())):
                logs += part
        return logs


IndexChanges = list[tuple[pa.Array, pa.Array, pa.Array]]


def _placed_by_index(plan: Planner) -> Callable[[str], bool]:
    """Whether the record-level index placed this write's keys in a file group (so a key a
    log block of that group upserts was already there): the group is one the index tracks
    and the index read whole. Otherwise ranges and blooms routed the keys, and a key they
    sent into the group's log may be new to it."""
    inner = plan.index.inner if isinstance(plan.index, SliceIndex) else plan.index
    if not isinstance(inner, RecordLevelIndex) or inner.damaged is not None:
        return lambda group: False
    untracked = inner.view.untracked
    return lambda group: group not in untracked


def delta_index_changes(r: _Routed) -> IndexChanges:
    """A delta commit's key changes for the record-level index, as (keys, partitions, file
    groups), as copy-on-write records them: keys new to a group (upserted into its log
    when the index did not place them there, or placed in a new group) with that group,
    deleted keys (a global key that moved included) with none. Updates in place change no
    mapping."""
    changes: IndexChanges = []
    known = _placed_by_index(r.plan)
    for group, d in sorted(r.deltas.groups.items()):
        if d.upserts and r.keys is not None and not known(group):
            keys = r.keys.take(pa.array(np.concatenate(d.upserts), pa.int64()))
            changes.append(_mapped(keys, d.sl.partition, group))
        for keys in d.delete_keys:
            changes.append(_mapped(keys, d.sl.partition, None))
    for g in r.new_groups:
        if len(g.placed) and r.keys is not None:
            keys = r.keys.take(pa.array(g.placed, pa.int64()))
            changes.append(_mapped(keys, g.partition, g.group))
    return changes


def _mapped(
    keys: pa.Array, partition: str, group: str | None
) -> tuple[pa.Array, pa.Array, pa.Array]:
    n = len(keys)
    return keys, pa.array([partition] * n, pa.string()), pa.array([group] * n, pa.string())


@dataclass(frozen=True)
class DeltaOutput:
    """What one delta write put under its instant: log files (as commit metadata records
    them), new base files with their write stats, and its key changes for the record-level
    index."""

    logs: list[dict[str, Any]]
    files: list[DataFile]
    stats: list[dict[str, Any]]
    index_changes: IndexChanges = field(default_factory=list)


def write_deltas(
    plan: Planner,
    props: KeyedProperties,
    operation: str,
    t: str,
    schema: pa.Schema,
    *,
    data_key: Callable[[str, str], str],
    batch: Batch | None = None,
    dbatch: Batch | None = None,
    where: Filter | None = None,
    on_duplicate: str = FAIL,
    on_plan: Callable[[Any], None] | None = None,
    object_name: str = "",
) -> DeltaOutput:
    """Steps 2 to 5 for prepared `batch` (upserts), `dbatch` (deletes by key) and `where`:
    each touched group's log block and the new file groups, under instant `t` at
    `data_key(partition, name)`. The caller commits. Runs in the process that began the
    instant, or in an engine's task that holds `plan` (keyed/write/engine.py)."""
    r = _route(plan, schema, operation, batch, dbatch, where, on_duplicate)
    if on_plan is not None:
        on_plan(plan)
    logs = _LogWriter(props, r, _Target(t, data_key, object_name)).write()
    settings, store = plan.table.settings, plan.table.store
    written = [
        write_group_at(store, data_key, t, g, r.rows, schema, plan.bloom_fpp, settings)
        for g in r.new_groups
    ]
    changes = delta_index_changes(r) if plan.record_index is not None else []
    return DeltaOutput(logs, [f for f, _ in written], [stat for _, stat in written], changes)


def delta_details(w: PreparedWrite) -> dict[str, Any]:
    """Steps 2 to 6 of a planned delta write, its new base files added to the transaction;
    returns the commit's details (write stats, log files, and the record-level index's
    delta when the table has one)."""
    req, plan, txn = w.request, w.plan, w.txn
    out = write_deltas(
        plan, req.props, req.operation, txn.instant_time, w.schema, data_key=txn.data_key,
        batch=w.batch, dbatch=w.dbatch, where=req.where, on_duplicate=req.on_duplicate,
        on_plan=req.on_plan,
    )  # fmt: skip
    for f in out.files:
        txn.add(f)
    details: dict[str, Any] = {
        WRITE_STATS: out.stats,
        LOG_FILES: out.logs,
        "keyed": {"files_read": plan.files_read, "properties": req.props.to_json()},
    }
    if plan.record_index is not None:
        path = txn.data_key("", "_record_index_delta.parquet")
        store, settings = plan.table.store, plan.table.settings
        details[RECORD_INDEX_DELTA] = write_delta(store, path, out.index_changes, settings)
    return details
