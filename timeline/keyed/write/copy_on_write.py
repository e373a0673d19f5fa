"""Copy-on-write for keyed tables: insert, upsert and delete rewrite only the file groups
that hold a changed key, each as a new file slice of the same file group.

One write, after `begin` (so every commit it does not see is validated against it):
1. the batch's duplicate records are combined by the merge mode;
2. the index names the files that may hold each key; only those are read;
3. updates and deletes mark rows of their file group; new keys fill small files of their
   partition first (Hudi's small-file handling, bounded by what the rewrite costs:
   keyed/write/sizing.py), then new file groups;
4. every touched group gets a new slice (untouched rows keep their commit time); the commit
   records per file its group, the slice it supersedes, inserts/updates/deletes, bytes,
   key range and bloom filter (`write_stats`).

Two writers touching one file group conflict at completion (the timeline's file-group rule);
disjoint ones both land.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ...file_groups.sidecars import WRITE_STATS
from ...metadata import DataFile
from ..index import RECORD_INDEX_DELTA, BloomBuilder, write_delta
from ..inflight import bounded_map
from .base_copy import CopiedBase, SliceFooters, base_to_copy
from .base_stream import held_bytes
from .decide import Replaced, decide_deletes, decide_filter, decide_upserts
from .delete_rewrite import delete_by_keys
from .located import LocatedBytes
from .planner import FAIL, Batch, Planner
from .planning import Filter
from .sizing import avg_record_size, fill_small_files
from .slice_writer import SliceOut, base_rows, new_rows, slice_stats, write_slice

if TYPE_CHECKING:
    from storage import ObjectStore

    from ...settings import TableSettings
    from ...txn import Transaction
    from .request import PreparedWrite


_NO_ROWS = np.zeros(0, dtype=np.int64)


@dataclass
class Group:
    """One file group this write gives a new slice."""

    group: str
    partition: str
    base: DataFile | None  # the slice it supersedes (None: a new file group); read when
    # the new slice is written, so one file group's rows are in memory at a time
    drop: set[int] = field(default_factory=set)  # base rows removed (updated or deleted)
    # Batch rows (positions, int64) written into this group, and of them the new or moved
    # records: arrays, so handing them to Arrow's take is a view, not a conversion of
    # Python ints under the GIL in every writer thread.
    new: np.ndarray = field(default_factory=lambda: _NO_ROWS)
    placed: np.ndarray = field(default_factory=lambda: _NO_ROWS)
    inserts: int = 0
    updates: int = 0
    deletes: int = 0

    @property
    def touched(self) -> bool:
        """Whether the write changes this group (rows dropped from it or written into it)."""
        return bool(self.drop) or len(self.new) > 0


class _Rewrites:
    """The file groups one copy-on-write commit gives a new slice."""

    def __init__(self, plan: Planner) -> None:
        self.plan = plan
        self.groups: dict[str, Group] = {}

    def group_of(self, f: DataFile) -> Group:
        g = self.groups.get(f.group)
        if g is None:
            g = self.groups[f.group] = Group(f.group, f.partition, f)
        return g

    def mark(self, r: Replaced) -> tuple[pa.Array, pa.Array]:
        """Drop the replaced rows from their groups (writing updates in place); returns the
        removed records' (keys, partitions) for the record-level index."""
        removed = r.new < 0
        for k, sel in r.by_file():
            g = self.group_of(self.plan.files[k])
            fresh = set(r.row[sel].tolist()) - g.drop
            g.drop |= fresh
            stay = r.new[sel][~removed[sel]]
            g.new = np.concatenate([g.new, stay.astype(np.int64, copy=False)])
            g.updates += len(stay)
            g.deletes += len(fresh) - len(stay)
        gone = np.flatnonzero(removed)
        parts = np.array([f.partition for f in self.plan.files], dtype=object)
        return (
            r.keys.take(pa.array(gone, pa.int64())),
            pa.array(parts[r.file[gone]].tolist() if len(gone) else [], pa.string()),
        )


def place_inserts(
    plan: Planner, pending: Mapping[str, np.ndarray], rewrites: _Rewrites | None = None
) -> list[Group]:
    """New records go into small files of their partition first (only with `rewrites`: the
    copy-on-write writer rewrites them; the rule is keyed/write/sizing.py's), then new file groups
    of
    about `parquet_max_file_size`."""
    s = plan.table.settings
    record_size = avg_record_size(plan.files, s.copy_on_write_record_size_estimate)
    per_file = max(1, s.parquet_max_file_size // record_size)
    by_group = {f.group: f for f in plan.files}
    rewritten = {k for k, g in rewrites.groups.items() if g.touched} if rewrites else set()
    new_groups: list[Group] = []
    for partition, rows in sorted(pending.items()):
        todo = np.asarray(rows, dtype=np.int64)
        if rewrites is not None:
            fills = fill_small_files(
                [f for f in plan.files if f.partition == partition],
                len(todo),
                record_size=record_size,
                small_file_limit=s.small_file_limit,
                rewrite_ratio=s.small_file_rewrite_ratio,
                rewritten=rewritten,
            )
            for fill in fills:
                g = rewrites.group_of(by_group[fill.group])
                taken, todo = todo[: fill.records], todo[fill.records :]
                g.new = np.concatenate([g.new, taken])
                g.placed = np.concatenate([g.placed, taken])
                g.inserts += len(taken)
        while len(todo):
            taken, todo = todo[:per_file], todo[per_file:]
            new_groups.append(
                Group(
                    f"{uuid.uuid4()}-0",
                    partition,
                    None,
                    new=taken,
                    placed=taken,
                    inserts=len(taken),
                )
            )
    return new_groups


def write_group_at(
    store: ObjectStore,
    data_key: Callable[[str, str], str],
    instant_time: str,
    g: Group,
    incoming: pa.Table | None,
    schema: pa.Schema,
    fpp: float,
    settings: TableSettings,
    *,
    task: str = "",
    located: LocatedBytes | None = None,
    footers: SliceFooters | None = None,
) -> tuple[DataFile, dict[str, Any]]:
    """One file group's new slice: kept rows of its base plus its new rows, written by the
    instant's key rule `data_key(partition, name)` and described (the caller adds it to the
    commit, in group order). Runs in the process that began the instant or in an engine's
    task (`task`: its attempt, see `SliceOut`). `located`: base files' bytes the locate
    step kept; the base is taken from there when it holds it, else fetched. `footers`: the
    write's empty slice footers (keyed/write/base_copy.py)."""
    n = settings.parquet_row_group_rows
    parts: list[Iterator[pa.Table]] = []
    lead: CopiedBase | None = None
    if g.base is not None:
        body = located.take(g.base) if located is not None else None
        if not g.drop and len(g.new):
            # Every row kept as it is: its row groups are copied, not decoded.
            lead, body = base_to_copy(store, g.base, schema, body, footers)
        if lead is None:
            parts.append(base_rows(store, g.base, g.drop, schema, n, body))
    if len(g.new) and incoming is not None:
        parts.append(new_rows(incoming, g.new, schema, n, instant_time))
    key = SliceOut(instant_time, data_key, schema, task).slice_key(g.partition, g.group)
    kept = g.base.rows - len(g.drop) if g.base is not None else 0
    bloom = BloomBuilder(kept + (len(g.new) if incoming is not None else 0), fpp)
    written = write_slice(
        store, key, chain.from_iterable(parts), schema, n, g.partition, g.group, bloom, lead,
        settings.parquet_compression_codec.arrow,
    )  # fmt: skip
    counts = (g.inserts, g.updates, g.deletes)
    return written.file, slice_stats(store, written, g.base, counts)


def index_changes(
    batch: Batch | None,
    groups: Sequence[Group],
    tombstones: Sequence[tuple[pa.Array, pa.Array]],
) -> list[tuple[pa.Array, pa.Array, pa.Array]]:
    """A write's key changes for the record-level index, as (keys, partitions, file groups):
    new and moved records with their file group, deleted ones with none (docs/tables.md,
    "Record-level index"). Records updated in place change no mapping."""
    changes: list[tuple[pa.Array, pa.Array, pa.Array]] = []
    if batch is not None:
        for g in groups:
            if len(g.placed):
                n = len(g.placed)
                changes.append(
                    (
                        batch.keys.take(pa.array(g.placed, pa.int64())),
                        pa.array([g.partition] * n, pa.string()),
                        pa.array([g.group] * n, pa.string()),
                    )
                )
    changes += [(k, p, pa.nulls(len(k), pa.string())) for k, p in tombstones]
    return changes


def _record_index_delta(
    txn: Transaction,
    plan: Planner,
    batch: Batch | None,
    groups: Sequence[Group],
    tombstones: Sequence[tuple[pa.Array, pa.Array]],
) -> dict[str, Any]:
    """The commit's delta shard of the record-level index (what its metadata names)."""
    path = txn.data_key("", "_record_index_delta.parquet")
    changes = index_changes(batch, groups, tombstones)
    return write_delta(txn.table.store, path, changes, plan.table.settings)


@dataclass(frozen=True)
class RewriteOutput:
    """What one copy-on-write write wrote (the caller commits it): new slices with their
    write stats in file-group order, every file group given a slice (for the record-level
    index), and the deleted records' (keys, partitions)."""

    slices: list[tuple[DataFile, dict[str, Any]]]
    groups: list[Group]
    tombstones: list[tuple[pa.Array, pa.Array]]


def write_rewrites(
    plan: Planner,
    out: SliceOut,
    operation: str,
    *,
    batch: Batch | None = None,
    dbatch: Batch | None = None,
    where: Filter | None = None,
    on_duplicate: str = FAIL,
    on_plan: Callable[[Planner], None] | None = None,
) -> RewriteOutput:
    """Steps 2 to 4 for prepared `batch` (upserts), `dbatch` (deletes by key) and `where`:
    locate the records, decide what each does, place new records, and write every touched
    file group's new slice. Runs in the process that began the instant, or in an engine's
    task that holds the plan (keyed/write/engine.py)."""
    if batch is None and where is None and dbatch is not None:
        # Keys alone: each candidate file is read once and filtered
        # (keyed/write/delete_rewrite.py).
        if on_plan is not None:
            on_plan(plan)
        slices, gone = delete_by_keys(out, plan, dbatch)
        return RewriteOutput(slices, [], [gone])
    rewrites = _Rewrites(plan)
    tombstones: list[tuple[pa.Array, pa.Array]] = []
    pending: dict[str, np.ndarray] = {}
    if batch is not None:
        upserts = decide_upserts(plan, batch, operation, on_duplicate)
        rewrites.mark(upserts.replaced)
        pending = upserts.inserts
    if dbatch is not None:
        tombstones.append(rewrites.mark(decide_deletes(plan, dbatch)))
    if where is not None:
        tombstones.append(rewrites.mark(decide_filter(plan, where)))
    new_groups = place_inserts(plan, pending, rewrites)
    # Bytes kept of files no group rewrites (their records were not replaced) go now.
    plan.located.keep_only({g.base.path for g in rewrites.groups.values() if g.base and g.touched})
    if on_plan is not None:
        on_plan(plan)
    slices = _write_groups(plan, out, rewrites, new_groups, batch)
    return RewriteOutput(slices, [*rewrites.groups.values(), *new_groups], tombstones)


def _write_groups(
    plan: Planner, out: SliceOut, rewrites: _Rewrites, new_groups: list[Group],
    batch: Batch | None,
) -> list[tuple[DataFile, dict[str, Any]]]:  # fmt: skip
    """Every touched file group's new slice (rewritten groups in group order, then new
    ones), a bounded number of groups' bytes in memory at once. Groups whose base file the
    locate step kept are rewritten first, so the kept bytes are let go early."""
    s, store = plan.table.settings, plan.table.store
    incoming_rows = batch.rows if batch is not None else None
    rewritten = sorted(rewrites.groups.values(), key=lambda g: g.group)
    todo = [*(g for g in rewritten if g.touched), *new_groups]
    first = sorted(range(len(todo)), key=lambda i: not plan.located.holds(todo[i].base))
    record_size = avg_record_size(plan.files, s.copy_on_write_record_size_estimate)
    fpp = plan.bloom_fpp
    footers = SliceFooters()

    def write(g: Group) -> tuple[DataFile, dict[str, Any]]:
        return write_group_at(
            store, out.data_key, out.t, g, incoming_rows, out.schema, fpp, s, task=out.task,
            located=plan.located, footers=footers,
        )  # fmt: skip

    done = bounded_map(
        write,
        [todo[i] for i in first],
        workers=s.write_parallelism,
        budget=s.write_inflight_bytes,
        cost=lambda g: _held(g) + len(g.new) * record_size,
    )
    by_position = dict(zip(first, done, strict=True))
    return [by_position[i] for i in range(len(todo))]


def _held(g: Group) -> int:
    """The bytes of `g`'s base file its rewrite holds at once (keyed/write/base_stream.py)."""
    return 0 if g.base is None else held_bytes(g.base)


def rewrite_details(w: PreparedWrite) -> dict[str, Any]:
    """Steps 2 to 4 of a planned copy-on-write write, its new slices added to the
    transaction; returns the commit's details (write stats, and the record-level index's
    delta when the table has one)."""
    req, plan, txn = w.request, w.plan, w.txn
    out = write_rewrites(
        plan, SliceOut(txn.instant_time, txn.data_key, w.schema), req.operation,
        batch=w.batch, dbatch=w.dbatch, where=req.where, on_duplicate=req.on_duplicate,
        on_plan=req.on_plan,
    )  # fmt: skip
    for f, _ in out.slices:
        txn.add(f)
    details: dict[str, Any] = {
        WRITE_STATS: [stat for _, stat in out.slices],
        "keyed": {"files_read": plan.files_read, "properties": req.props.to_json()},
    }
    if plan.record_index is not None:
        details[RECORD_INDEX_DELTA] = _record_index_delta(
            txn, plan, w.batch, out.groups, out.tombstones
        )
    return details
