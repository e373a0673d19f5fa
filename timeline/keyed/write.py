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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CommitConflict, DuplicateKeys
from ..file_stats import describe_bytes
from ..instant import COMMIT, ROLLBACK, Instant
from ..layout import data_instant_time
from ..metadata import DataFile
from ..parquet_io import read_files, to_parquet_bytes
from ..schema import conform, merge_schemas
from ..snapshot import TableState
from .index import WRITE_STATS, IndexFactory, KeyIndex, bloom_ref, range_bloom_index
from .keys import (
    RECORD_KEY_COL,
    identities,
    key_range,
    partition_paths,
    record_keys,
    with_meta,
)
from .merge import combine, incoming_wins
from .properties import EVENT_TIME, GLOBAL, KeyedProperties, PropertiesError

if TYPE_CHECKING:
    from ..table import Table
    from ..txn import Transaction

#: A filter for `delete`: a pyarrow compute expression or a SQL predicate (DuckDB).
Filter: TypeAlias = pc.Expression | str
FAIL = "fail"
DROP = "drop"


@dataclass
class Batch:
    """Incoming records after combining duplicates."""

    rows: pa.Table  # upserts: with meta columns; deletes: the given columns
    ids: list[str]
    partitions: list[str]
    ordering: list[Any] | None


@dataclass
class _Group:
    """One file group this write gives a new slice."""

    group: str
    partition: str
    base: DataFile | None  # the slice it supersedes (None: a new file group); read when
    # the new slice is written, so one file group's rows are in memory at a time
    drop: set[int] = field(default_factory=set)  # base rows removed (updated or deleted)
    new: list[int] = field(default_factory=list)  # batch rows written into this group
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


def prepare_batch(data: pa.Table, props: KeyedProperties, instant: str, *, upsert: bool) -> Batch:
    keys = record_keys(data, props)
    if props.key_scope == GLOBAL and not upsert:
        parts = [""] * data.num_rows  # a global key names its record wherever it lives
    else:
        parts = partition_paths(data, props)
    ordering = None
    if props.ordering_field and props.ordering_field in data.column_names:
        ordering = data.column(props.ordering_field).to_pylist()
    elif upsert and props.merge_mode == EVENT_TIME:
        raise PropertiesError(
            f"merge mode event_time needs the ordering field {props.ordering_field!r} "
            "in the written data"
        )
    ids = identities(keys, parts, props)
    keep = combine(ids, ordering, props)
    if len(keep) != data.num_rows:
        idx = pa.array(keep, pa.int64())
        data = data.take(idx)
        keys = [keys[i] for i in keep]
        parts = [parts[i] for i in keep]
        ids = [ids[i] for i in keep]
        ordering = [ordering[i] for i in keep] if ordering is not None else None
    rows = with_meta(data, instant, keys) if upsert else data
    return Batch(rows, ids, parts, ordering)


class _Planner:
    """The state one write plans on, and the file groups it rewrites."""

    def __init__(
        self, table: Table, props: KeyedProperties, st: TableState, index: IndexFactory | None
    ) -> None:
        self.table = table
        self.props = props
        self.st = st
        self.files = st.snapshot().files
        self.schema = st.schema()
        self.index: KeyIndex = (index or range_bloom_index)(table.store, st, props)
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

    def _identity(self, f: DataFile, key: str) -> str:
        return key if self.props.key_scope == GLOBAL else f"{f.partition}\x00{key}"

    def locate(self, batch: Batch) -> dict[str, tuple[DataFile, int, Any]]:
        """Record identity -> (file, row, ordering value) for the batch's records the table
        holds. Candidate files are read for their key (and ordering) column only, one at a
        time: memory holds the hits, never the files."""
        wanted = set(batch.ids)
        keys = [i.split("\x00", 1)[-1] for i in batch.ids]
        if self.props.key_scope == GLOBAL:
            scopes = [(list(self.files), list(range(len(keys))))]
        else:
            by_part: dict[str, list[int]] = {}
            for i, p in enumerate(batch.partitions):
                by_part.setdefault(p, []).append(i)
            scopes = [
                ([f for f in self.files if f.partition == p], pos) for p, pos in by_part.items()
            ]
        found: dict[str, tuple[DataFile, int, Any]] = {}
        by_path = {f.path: f for f in self.files}
        order_col = self.props.ordering_field
        columns = [RECORD_KEY_COL]
        if order_col and self.schema is not None and order_col in self.schema.names:
            columns.append(order_col)
        for files, positions in scopes:
            if not files or not positions:
                continue
            for path, hits in self.index.candidates(files, [keys[i] for i in positions]).items():
                f = by_path[path]
                data = self.rows_of(f, columns)
                self.files_read += 1
                if data.num_rows == 0:
                    continue
                stored = data.column(RECORD_KEY_COL)
                probe = pa.array([keys[positions[h]] for h in hits], pa.string())
                rows = pc.indices_nonzero(pc.is_in(stored, value_set=probe))
                hit_keys = stored.take(rows).to_pylist()
                hit_order = (
                    data.column(order_col).take(rows).to_pylist()
                    if len(columns) > 1 and order_col
                    else [None] * len(hit_keys)
                )
                for row, key, value in zip(rows.to_pylist(), hit_keys, hit_order, strict=True):
                    ident = self._identity(f, key)
                    if ident in wanted:
                        found[ident] = (f, row, value)
        return found


def avg_record_size(files: Sequence[DataFile], default: int) -> int:
    rows = sum(f.rows for f in files)
    size = sum(f.size for f in files if f.rows)
    return max(1, size // rows) if rows else default


def _place_inserts(plan: _Planner, pending: dict[str, list[int]]) -> list[_Group]:
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
            g.inserts += len(taken)
        while todo:
            taken, todo = todo[:per_file], todo[per_file:]
            g = _Group(f"{uuid.uuid4()}-0", partition, None, new=taken, inserts=len(taken))
            new_groups.append(g)
    return new_groups


def _write_group(
    txn: Transaction,
    plan: _Planner,
    g: _Group,
    incoming: pa.Table | None,
    schema: pa.Schema,
    fpp: float,
) -> dict[str, Any]:
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
    txn.add(f)
    lo, hi = key_range(data)
    keys = data.column(RECORD_KEY_COL).to_pylist() if data.num_rows else []
    return {
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


def _filter_matches(data: pa.Table, where: Filter) -> list[int]:
    """Row positions of `data` the filter selects."""
    pos = pa.array(range(data.num_rows), pa.int64())
    marked = data.append_column("__flowledger_pos", pos)
    if isinstance(where, str):
        con = duckdb.connect()
        try:
            con.register("t", marked)
            got = con.execute(f"SELECT __flowledger_pos FROM t WHERE {where}").fetchall()
        finally:
            con.close()
        return sorted(int(r[0]) for r in got)
    return [int(v) for v in marked.filter(where).column("__flowledger_pos").to_pylist()]


def plan_on(txn: Transaction, st: TableState) -> None:
    """Validate the commit only against completions this plan did not see: the state read
    after `begin` may be newer than the transaction's base, and a write planned on it must
    not conflict with what it already merged. Only a rollback fencing this very instant off
    (it could only have started after `begin`) must still stop it."""
    for e in st.entries:
        if (
            e.seq > txn.base
            and e.action == ROLLBACK
            and e.metadata.get("target_state") == "pending"
            and e.target == txn.instant_time
        ):
            raise CommitConflict(
                f"instant {txn.instant_time} was rolled back by {e.time}", e.time, e.action
            )
    txn.base = max([txn.base, *(e.seq for e in st.entries)])


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
    on_plan: Callable[[_Planner], None] | None = None,
    index: IndexFactory | None = None,
) -> Instant:
    """One keyed commit: upsert or insert `data`, or delete `deletes` (keys) / `where`.
    `index` replaces the range/bloom index; `on_plan` runs between planning and writing
    (tests use it to interleave writers)."""
    txn = table.begin(COMMIT, operation=operation)
    try:
        st = table.state()  # read after begin: whatever it misses is validated at commit
        plan_on(txn, st)
        plan = _Planner(table, props, st, index)
        s = table.settings
        batch = (
            prepare_batch(data, props, txn.instant_time, upsert=True) if data is not None else None
        )
        schema = plan.schema
        if batch is not None:
            schema = merge_schemas(plan.schema, batch.rows.schema, table.uri)
        txn.schema = schema
        pending: dict[str, list[int]] = {}
        if batch is not None:
            found = plan.locate(batch)
            dupes = []
            for i, ident in enumerate(batch.ids):
                hit = found.get(ident)
                if hit is None:
                    pending.setdefault(batch.partitions[i], []).append(i)
                    continue
                if operation == "insert":
                    dupes.append(ident.split("\x00", 1)[-1])
                    continue
                f, row, stored = hit
                incoming = batch.ordering[i] if batch.ordering is not None else None
                if not incoming_wins(stored, incoming, props, has_ordering=True):
                    continue  # an older version than the table's: Hudi keeps the stored one
                g = plan.group_of(f)
                g.drop.add(row)
                if f.partition == batch.partitions[i]:
                    g.new.append(i)
                    g.updates += 1
                else:  # a global key moved partition: deleted there, inserted here
                    g.deletes += 1
                    pending.setdefault(batch.partitions[i], []).append(i)
            if dupes and on_duplicate == FAIL:
                raise DuplicateKeys(
                    f"insert into {table.uri}: {len(dupes)} key(s) already in the table, e.g. "
                    f"{', '.join(sorted(dupes)[:5])} (upsert them, or insert with "
                    "on_duplicate='drop')",
                    sorted(dupes),
                )
        if deletes is not None:
            dbatch = prepare_batch(deletes, props, txn.instant_time, upsert=False)
            position = {ident: i for i, ident in enumerate(dbatch.ids)}
            for ident, (f, row, stored) in plan.locate(dbatch).items():
                i = position[ident]
                has = dbatch.ordering is not None
                incoming = dbatch.ordering[i] if dbatch.ordering is not None else None
                if incoming_wins(stored, incoming, props, has_ordering=has):
                    g = plan.group_of(f)
                    if row not in g.drop:
                        g.drop.add(row)
                        g.deletes += 1
        if where is not None:
            for f in plan.files:
                rows = plan.rows_of(f)
                hits = _filter_matches(rows, where) if rows.num_rows else []
                if hits:
                    g = plan.group_of(f)
                    g.deletes += len(set(hits) - g.drop)
                    g.drop.update(hits)
        new_groups = _place_inserts(plan, pending)
        if on_plan is not None:
            on_plan(plan)
        incoming_rows = batch.rows if batch is not None else None
        stats = [
            _write_group(txn, plan, g, incoming_rows, schema, s.bloom_index_fpp)
            for g in sorted(plan.groups.values(), key=lambda g: g.group)
            if g.drop or g.new
        ]
        fpp = s.bloom_index_fpp
        stats += [_write_group(txn, plan, g, incoming_rows, schema, fpp) for g in new_groups]
        details = {
            WRITE_STATS: stats,
            "keyed": {"files_read": plan.files_read, "properties": props.to_json()},
        }
        return txn.commit(metadata, details)
    except BaseException:
        txn.abort()
        raise
