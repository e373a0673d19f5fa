"""Copy-on-write for keyed tables: insert, upsert and delete rewrite only the file groups
that hold a changed key, each as a new file slice of the same file group.

One write, after `begin` (so every commit it does not see is validated against it):
1. the batch's duplicate records are combined by the merge mode;
2. the index names the files that may hold each key; only those are read;
3. updates and deletes mark rows of their file group; new keys fill small files of their
   partition first (Hudi's small-file handling), then new file groups;
4. every touched group gets a new slice (untouched rows keep their commit time); the commit
   records per file its group, the slice it supersedes, inserts/updates/deletes, bytes,
   key range and bloom filter (`write_stats`).

Two writers touching one file group conflict at completion (the timeline's file-group rule);
disjoint ones both land.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..file_stats import describe_bytes
from ..instant import COMMIT, Instant
from ..layout import data_instant_time
from ..metadata import DataFile
from ..parquet_io import read_files, to_parquet_bytes
from ..schema import conform, merge_schemas
from ..snapshot import TableState
from .apply import apply_deletes, apply_upserts
from .index import WRITE_STATS, IndexFactory, KeyIndex, bloom_ref
from .indexing import merge_if_due
from .keys import RECORD_KEY_COL, key_range, partition_paths, record_keys, with_meta
from .merge import combine_rows
from .planning import Filter, filter_matches, plan_on
from .properties import EVENT_TIME, GLOBAL, KeyedProperties, PropertiesError
from .record_index import RECORD_INDEX_DELTA, choose_index, index_view, write_delta

if TYPE_CHECKING:
    from ..table import Table
    from ..txn import Transaction

FAIL = "fail"
DROP = "drop"


@dataclass
class Batch:
    """Incoming records after combining duplicates (arrays aligned with `rows`)."""

    rows: pa.Table  # upserts: with meta columns; deletes: the given columns
    keys: pa.Array  # record keys as text
    ids: pa.Array  # record identities (key, or partition and key)
    partitions: pa.Array
    ordering: pa.Array | None


@dataclass
class _Group:
    """One file group this write gives a new slice."""

    group: str
    partition: str
    base: DataFile | None  # the slice it supersedes (None: a new file group); read when
    # the new slice is written, so one file group's rows are in memory at a time
    drop: set[int] = field(default_factory=set)  # base rows removed (updated or deleted)
    new: list[int] = field(default_factory=list)  # batch rows written into this group
    placed: list[int] = field(default_factory=list)  # of which new or moved records
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


def _key_array(data: pa.Table, props: KeyedProperties) -> pa.Array:
    if len(props.record_key) == 1:
        (c,) = props.record_key
        if c in data.column_names:
            col = data.column(c)
            plain = pa.types.is_integer(col.type) or pa.types.is_string(col.type)
            if plain and not col.null_count:
                return pc.cast(col, pa.string()).combine_chunks()  # as record_keys words it
    return pa.array(record_keys(data, props), pa.string())


def prepare_batch(data: pa.Table, props: KeyedProperties, instant: str, *, upsert: bool) -> Batch:
    keys = _key_array(data, props)
    if props.key_scope == GLOBAL and not upsert:
        parts = pa.array([""] * data.num_rows, pa.string())  # a global key names its record
    else:  # wherever it lives
        parts = pa.array(partition_paths(data, props), pa.string())
    ordering = None
    if props.ordering_field and props.ordering_field in data.column_names:
        ordering = data.column(props.ordering_field).combine_chunks()
    elif upsert and props.merge_mode == EVENT_TIME:
        raise PropertiesError(
            f"merge mode event_time needs the ordering field {props.ordering_field!r} "
            "in the written data"
        )
    ids = keys if props.key_scope == GLOBAL else pc.binary_join_element_wise(parts, keys, "\x00")
    keep = combine_rows(ids, ordering, props)
    if len(keep) != data.num_rows:
        idx = pa.array(keep, pa.int64())
        data = data.take(idx)
        keys, parts, ids = keys.take(idx), parts.take(idx), ids.take(idx)
        ordering = ordering.take(idx) if ordering is not None else None
    rows = with_meta(data, instant, keys) if upsert else data
    return Batch(rows, keys, ids, parts, ordering)


class Planner:
    """The state one write plans on, and the file groups it rewrites."""

    def __init__(
        self, table: Table, props: KeyedProperties, st: TableState, index: IndexFactory | None
    ) -> None:
        self.table = table
        self.props = props
        self.st = st
        self.files = st.snapshot().files
        self.schema = st.schema()
        factory = index or choose_index(table.settings.keyed_index)
        self.index: KeyIndex = factory(table.store, st, props)
        #: The record-level index, if one exists: this write then records its key changes.
        self.record_index = index_view(st)
        self.groups: dict[str, _Group] = {}
        self.files_read = 0  # files whose keys were read to find the batch's records

    def rows_of(self, f: DataFile, columns: Sequence[str] | None = None) -> pa.Table:
        """A file's rows (or some columns) in the table's schema; nothing is kept."""
        return read_files(self.table.store, [f], columns, self.schema) or pa.table({})

    def group_of(self, f: DataFile) -> _Group:
        g = self.groups.get(f.group)
        if g is None:
            g = _Group(f.group, f.partition, f)
            self.groups[f.group] = g
        return g

    def locate(self, batch: Batch) -> pa.Table:
        """The batch's records the table holds: a table of `pos` (batch row), `file` (index
        into `self.files`), `row` and `stored` (ordering value). Candidate files are read for
        their key (and ordering) column only, one at a time: memory holds the hits."""
        n = len(batch.ids)
        if self.props.key_scope == GLOBAL:
            scopes = [(list(range(len(self.files))), np.arange(n, dtype=np.int64))]
        else:
            enc = pc.dictionary_encode(batch.partitions)
            codes = enc.indices.to_numpy(zero_copy_only=False)
            scopes = []
            for c, p in enumerate(enc.dictionary.to_pylist()):
                pos = np.flatnonzero(codes == c).astype(np.int64)
                fidx = [k for k, f in enumerate(self.files) if f.partition == p]
                scopes.append((fidx, pos))
        index_of = {f.path: k for k, f in enumerate(self.files)}
        order_col = self.props.ordering_field
        columns = [RECORD_KEY_COL]
        if order_col and self.schema is not None and order_col in self.schema.names:
            columns.append(order_col)
        pieces = []
        for fidx, positions in scopes:
            if not fidx or not len(positions):
                continue
            scope_keys = batch.keys.take(pa.array(positions))
            files = [self.files[k] for k in fidx]
            for path, hits in self.index.candidates(files, scope_keys.to_pylist()).items():
                k = index_of[path]
                data = self.rows_of(self.files[k], columns)
                self.files_read += 1
                if data.num_rows == 0:
                    continue
                stored = data.column(RECORD_KEY_COL)
                probe_pos = positions[np.asarray(hits, dtype=np.int64)]
                probe = pa.table(
                    {"key": batch.keys.take(pa.array(probe_pos)), "pos": pa.array(probe_pos)}
                )
                rows = pc.indices_nonzero(pc.is_in(stored, value_set=probe.column("key")))
                if not len(rows):
                    continue
                got = {
                    "key": stored.take(rows),
                    "row": pc.cast(rows, pa.int64()),
                    "file": pa.array(np.full(len(rows), k, dtype=np.int64)),
                }
                if len(columns) > 1:
                    got["stored"] = data.column(order_col).take(rows)
                pieces.append(pa.table(got).join(probe, "key", join_type="inner").sort_by("row"))
        if not pieces:
            return pa.table(
                {
                    "pos": pa.array([], pa.int64()),
                    "file": pa.array([], pa.int64()),
                    "row": pa.array([], pa.int64()),
                }
            )
        found = pa.concat_tables(pieces, promote_options="default")
        # A key held twice (two writers inserted it concurrently): the last file read wins.
        found = found.append_column("seq", pa.array(np.arange(found.num_rows, dtype=np.int64)))
        last = found.group_by("pos").aggregate([("seq", "max")]).column("seq_max")
        return found.take(last).sort_by("pos")


def avg_record_size(files: Sequence[DataFile], default: int) -> int:
    rows = sum(f.rows for f in files)
    size = sum(f.size for f in files if f.rows)
    return max(1, size // rows) if rows else default


def _place_inserts(plan: Planner, pending: dict[str, list[int]]) -> list[_Group]:
    """New records go into small files of their partition first, then new file groups."""
    s = plan.table.settings
    record_size = avg_record_size(plan.files, s.copy_on_write_record_size_estimate)
    per_file = max(1, s.parquet_max_file_size // record_size)
    new_groups: list[_Group] = []
    for partition, rows in sorted(pending.items()):
        todo = list(rows)
        small = sorted(
            (f for f in plan.files if f.partition == partition and f.size < s.small_file_limit),
            key=lambda f: (f.size, f.path),
        )
        for f in small:
            if not todo:
                break
            size = avg_record_size([f], record_size)
            room = (s.small_file_limit - f.size) // size
            if room <= 0:
                continue
            g = plan.group_of(f)
            taken, todo = todo[:room], todo[room:]
            g.new += taken
            g.placed += taken
            g.inserts += len(taken)
        while todo:
            taken, todo = todo[:per_file], todo[per_file:]
            g = _Group(
                f"{uuid.uuid4()}-0",
                partition,
                None,
                new=taken,
                placed=list(taken),
                inserts=len(taken),
            )
            new_groups.append(g)
    return new_groups


def _write_group(
    txn: Transaction,
    plan: Planner,
    g: _Group,
    incoming: pa.Table | None,
    schema: pa.Schema,
    fpp: float,
) -> tuple[DataFile, dict[str, Any]]:
    """One file group's new slice: kept rows of its base plus its new rows, written and
    described (the caller adds it to the commit, in group order)."""
    pieces = []
    if g.base is not None:
        kept = plan.rows_of(g.base)
        if g.drop:
            mask = np.ones(kept.num_rows, dtype=bool)
            mask[np.fromiter(g.drop, dtype=np.int64, count=len(g.drop))] = False
            kept = kept.filter(pa.array(mask))
        pieces.append(conform(kept, schema))
    if g.new and incoming is not None:
        pieces.append(conform(incoming.take(pa.array(g.new, pa.int64())), schema))
    data = (
        pa.concat_tables(pieces, promote_options="default")
        if pieces
        else conform(schema.empty_table(), schema)
    )
    key = txn.data_key(g.partition, f"{g.group}_{txn.instant_time}.parquet")
    body = to_parquet_bytes(data)
    txn.table.store.put(key, body)
    f = describe_bytes(key, body, g.partition, g.group)
    lo, hi = key_range(data)
    keys = data.column(RECORD_KEY_COL)
    return f, {
        "path": key,
        "file_group": g.group,
        "partition": g.partition,
        "prev_commit": data_instant_time(g.base.path) if g.base else None,
        "prev_path": g.base.path if g.base else None,
        "inserts": g.inserts,
        "updates": g.updates,
        "deletes": g.deletes,
        "rows": data.num_rows,
        "bytes": len(body),
        "min_key": lo,
        "max_key": hi,
        **bloom_ref(txn.table.store, key, keys, fpp),
    }


def _record_index_delta(
    txn: Transaction,
    plan: Planner,
    batch: Batch | None,
    groups: Sequence[_Group],
    tombstones: Sequence[tuple[pa.Array, pa.Array]],
) -> dict[str, Any]:
    """The commit's key changes for the record-level index: new and moved records with their
    file group, deleted ones with none (docs/tables.md, "Record-level index")."""
    changes: list[tuple[pa.Array, pa.Array, pa.Array]] = []
    if batch is not None:
        for g in groups:
            if g.placed:
                n = len(g.placed)
                changes.append(
                    (
                        batch.keys.take(pa.array(g.placed, pa.int64())),
                        pa.array([g.partition] * n, pa.string()),
                        pa.array([g.group] * n, pa.string()),
                    )
                )
    changes += [(k, p, pa.nulls(len(k), pa.string())) for k, p in tombstones]
    path = txn.data_key("", "_record_index_delta.parquet")
    return write_delta(txn.table.store, path, changes, plan.table.settings)


def keyed_write(
    table: Table,
    props: KeyedProperties,
    operation: str,
    *,
    data: pa.Table | None = None,
    deletes: pa.Table | None = None,
    where: Filter | None = None,
    on_duplicate: str = FAIL,
    metadata: dict[str, str] | None = None,
    on_plan: Callable[[Planner], None] | None = None,
    index: IndexFactory | None = None,
) -> Instant:
    """One keyed commit: upsert or insert `data`, or delete `deletes` (keys) / `where`.
    `index` replaces the range/bloom index; `on_plan` runs between planning and writing
    (tests use it to interleave writers)."""
    txn = table.begin(COMMIT, operation=operation)
    try:
        st = table.state()  # read after begin: whatever it misses is validated at commit
        plan_on(txn, st)
        plan = Planner(table, props, st, index)
        s = table.settings
        batch = (
            prepare_batch(data, props, txn.instant_time, upsert=True) if data is not None else None
        )
        schema = plan.schema
        if batch is not None:
            schema = merge_schemas(plan.schema, batch.rows.schema, table.uri)
        txn.schema = schema
        pending: dict[str, list[int]] = {}
        tombstones: list[tuple[pa.Array, pa.Array]] = []  # (keys, partitions) deleted
        if batch is not None:
            apply_upserts(plan, batch, operation, on_duplicate, pending)
        if deletes is not None:
            dbatch = prepare_batch(deletes, props, txn.instant_time, upsert=False)
            tombstones.append(apply_deletes(plan, dbatch))
        if where is not None:
            for f in plan.files:
                rows = plan.rows_of(f)
                hits = filter_matches(rows, where) if rows.num_rows else []
                if hits:
                    g = plan.group_of(f)
                    g.deletes += len(set(hits) - g.drop)
                    g.drop.update(hits)
                    gone = rows.column(RECORD_KEY_COL).take(pa.array(hits, pa.int64()))
                    gone = gone.combine_chunks().cast(pa.string())
                    tombstones.append((gone, pa.array([f.partition] * len(hits), pa.string())))
        new_groups = _place_inserts(plan, pending)
        if on_plan is not None:
            on_plan(plan)
        incoming_rows = batch.rows if batch is not None else None
        todo = [
            *(g for g in sorted(plan.groups.values(), key=lambda g: g.group) if g.drop or g.new),
            *new_groups,
        ]
        with ThreadPoolExecutor(max(1, min(s.write_parallelism, len(todo)))) as pool:
            slices = list(
                pool.map(
                    lambda g: _write_group(txn, plan, g, incoming_rows, schema, s.bloom_index_fpp),
                    todo,
                )
            )
        for f, _ in slices:
            txn.add(f)
        stats = [stat for _, stat in slices]
        details: dict[str, Any] = {
            WRITE_STATS: stats,
            "keyed": {"files_read": plan.files_read, "properties": props.to_json()},
        }
        deltas = 0
        if plan.record_index is not None:
            written = [*plan.groups.values(), *new_groups]
            delta = _record_index_delta(txn, plan, batch, written, tombstones)
            details[RECORD_INDEX_DELTA] = delta
            deltas = len(plan.record_index.deltas) + (1 if delta["rows"] else 0)
        done = txn.commit(metadata, details)
    except BaseException:
        txn.abort()
        raise
    if plan.record_index is not None:
        merge_if_due(table, deltas)  # counted as of the plan: a concurrent commit may add one
    return done
