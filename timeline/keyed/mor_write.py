"""Delta commits of merge-on-read tables: insert, upsert and delete as one `deltacommit`
that appends a log block to each touched file group instead of rewriting its base file.

One write, after `begin` (as copy-on-write, see write.py):
1. the batch's duplicate records are combined by the merge mode;
2. the index names the base files that may hold each key; the slices of those file groups
   (base merged with its logs) are read for their key and ordering columns, so a key updated
   or deleted in a log is seen as it is now;
3. records the table holds get a log block in their file group: upserts whole, deletes as
   key and ordering value; the merge mode is applied here against the merged state, so a
   reader only applies blocks in completion order;
4. new keys go into new base files (new file groups), never into logs: every key then has
   a base file whose key range and bloom filter name it, and the index needs nothing else.
   (Hudi can also route inserts into log files of small file groups when its index can
   look keys up in logs; ours cannot, and small new groups are what clustering merges.)

Delta commits touching one file group conflict (the timeline's file-group rule counts log
files); a compaction never conflicts with them (slices.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import crash
from ..errors import DuplicateKeys
from ..file_stats import describe_bytes
from ..instant import DELTA_COMMIT, Instant
from ..metadata import DataFile
from ..parquet_io import to_parquet_bytes
from ..schema import conform, merge_schemas
from .index import WRITE_STATS, IndexFactory, bloom_ref, range_bloom_index
from .keys import COMMIT_TIME_COL, RECORD_KEY_COL, key_range
from .logfile import DELETE, LOG_FILES, OP_COL, UPSERT, log_name, write_log
from .merge import incoming_wins
from .mor_read import read_slice
from .planning import Filter, filter_matches, plan_on
from .properties import GLOBAL, KeyedProperties
from .slices import MorSlice, mor_slices
from .write import FAIL, Batch, prepare_batch

if TYPE_CHECKING:
    from ..table import Table
    from ..txn import Transaction


@dataclass
class _Delta:
    """What one file group's log block of this write holds."""

    sl: MorSlice
    upserts: list[int] = field(default_factory=list)  # batch rows
    deletes: dict[str, Any] = field(default_factory=dict)  # record key -> ordering value


@dataclass(frozen=True)
class _Records:
    """A batch's identities, partitions and ordering values as lists: the merge-on-read
    planner walks the batch record by record (one log block per touched file group)."""

    ids: list[str]
    partitions: list[str]
    ordering: list[Any] | None


def _records(batch: Batch) -> _Records:
    ordering = batch.ordering.to_pylist() if batch.ordering is not None else None
    return _Records(batch.ids.to_pylist(), batch.partitions.to_pylist(), ordering)


class _MorPlanner:
    def __init__(
        self, table: Table, props: KeyedProperties, index: IndexFactory | None, st: Any
    ) -> None:
        self.table = table
        self.props = props
        self.st = st
        self.slices = mor_slices(st)
        self.by_path = {sl.base.path: sl for sl in self.slices.values()}
        self.schema = st.schema()
        self.index = (index or range_bloom_index)(table.store, st, props)
        self.deltas: dict[str, _Delta] = {}
        self.files_read = 0

    def delta(self, sl: MorSlice) -> _Delta:
        d = self.deltas.get(sl.group)
        if d is None:
            d = self.deltas[sl.group] = _Delta(sl)
        return d

    def _ident(self, sl: MorSlice, key: str) -> str:
        return key if self.props.key_scope == GLOBAL else f"{sl.partition}\x00{key}"

    def locate(self, batch: Batch) -> dict[str, tuple[MorSlice, Any]]:
        """Record identity -> (slice, ordering value now) for the batch's stored records."""
        records = _records(batch)
        keys = batch.keys.to_pylist()
        wanted = set(records.ids)
        bases = [sl.base for sl in self.slices.values()]
        if self.props.key_scope == GLOBAL:
            scopes: list[tuple[list[DataFile], list[int]]] = [(bases, list(range(len(keys))))]
        else:
            by_part: dict[str, list[int]] = {}
            for i, p in enumerate(records.partitions):
                by_part.setdefault(p, []).append(i)
            scopes = [([f for f in bases if f.partition == p], pos) for p, pos in by_part.items()]
        order_col = self.props.ordering_field
        columns = [RECORD_KEY_COL]
        if order_col and self.schema is not None and order_col in self.schema.names:
            columns.append(order_col)
        found: dict[str, tuple[MorSlice, Any]] = {}
        for files, positions in scopes:
            if not files or not positions:
                continue
            hits = self.index.candidates(files, [keys[i] for i in positions])
            for path in hits:
                sl = self.by_path[path]
                data = read_slice(self.table.store, sl, self.schema, columns)
                self.files_read += 1
                if data.num_rows == 0:
                    continue
                stored = data.column(RECORD_KEY_COL)
                probe = pa.array(sorted({keys[positions[h]] for h in hits[path]}), pa.string())
                rows = pc.indices_nonzero(pc.is_in(stored, value_set=probe))
                got = stored.take(rows).to_pylist()
                values = (
                    data.column(order_col).take(rows).to_pylist()
                    if len(columns) > 1 and order_col
                    else [None] * len(got)
                )
                for key, value in zip(got, values, strict=True):
                    ident = self._ident(sl, key)
                    if ident in wanted:
                        found[ident] = (sl, value)
        return found


def _new_base(
    txn: Transaction, partition: str, rows: pa.Table, fpp: float
) -> tuple[DataFile, dict[str, Any]]:
    group = f"{uuid.uuid4()}-0"
    key = txn.data_key(partition, f"{group}_{txn.instant_time}.parquet")
    body = to_parquet_bytes(rows)
    txn.table.store.put(key, body)
    f = describe_bytes(key, body, partition, group)
    lo, hi = key_range(rows)
    stat = {
        "path": key,
        "file_group": group,
        "partition": partition,
        "prev_commit": None,
        "prev_path": None,
        "inserts": rows.num_rows,
        "updates": 0,
        "deletes": 0,
        "rows": rows.num_rows,
        "bytes": len(body),
        "min_key": lo,
        "max_key": hi,
        **bloom_ref(txn.table.store, key, rows.column(RECORD_KEY_COL), fpp),
    }
    return f, stat


def _block(
    d: _Delta, incoming: pa.Table | None, schema: pa.Schema, props: KeyedProperties, t: str
) -> pa.Table:
    pieces = []
    if d.upserts and incoming is not None:
        up = conform(incoming.take(pa.array(d.upserts, pa.int64())), schema)
        pieces.append(up.append_column(OP_COL, pa.array([UPSERT] * up.num_rows, pa.string())))
    if d.deletes:
        keys = sorted(d.deletes)
        cols: dict[str, pa.Array] = {
            COMMIT_TIME_COL: pa.array([t] * len(keys), pa.string()),
            RECORD_KEY_COL: pa.array(keys, pa.string()),
        }
        order = props.ordering_field
        if order and order in schema.names:
            cols[order] = pa.array([d.deletes[k] for k in keys], schema.field(order).type)
        dl = conform(pa.table(cols), schema)
        pieces.append(dl.append_column(OP_COL, pa.array([DELETE] * len(keys), pa.string())))
    return pa.concat_tables(pieces, promote_options="default")


def delta_write(
    table: Table,
    props: KeyedProperties,
    operation: str,
    *,
    data: pa.Table | None = None,
    deletes: pa.Table | None = None,
    where: Filter | None = None,
    on_duplicate: str = FAIL,
    metadata: dict[str, str] | None = None,
    on_plan: Callable[[Any], None] | None = None,
    index: IndexFactory | None = None,
) -> Instant:
    """One delta commit: upsert or insert `data`, or delete `deletes` (keys) / `where`."""
    txn = table.begin(DELTA_COMMIT, operation=operation)
    try:
        st = table.state()
        plan_on(txn, st)
        plan = _MorPlanner(table, props, index, st)
        t = txn.instant_time
        batch = prepare_batch(data, props, t, upsert=True) if data is not None else None
        schema = plan.schema
        if batch is not None:
            schema = merge_schemas(plan.schema, batch.rows.schema, table.uri)
        assert schema is not None  # a keyed table states its meta columns at creation
        txn.schema = schema
        new_rows: dict[str, list[int]] = {}
        if batch is not None:
            found = plan.locate(batch)
            records = _records(batch)
            dupes = []
            for i, ident in enumerate(records.ids):
                hit = found.get(ident)
                if hit is None:
                    new_rows.setdefault(records.partitions[i], []).append(i)
                    continue
                if operation == "insert":
                    dupes.append(ident.split("\x00", 1)[-1])
                    continue
                sl, stored = hit
                incoming = records.ordering[i] if records.ordering is not None else None
                if not incoming_wins(stored, incoming, props, has_ordering=True):
                    continue
                d = plan.delta(sl)
                if sl.partition == records.partitions[i]:
                    d.upserts.append(i)
                else:  # a global key moved partition: deleted there, a new record here
                    d.deletes[ident.split("\x00", 1)[-1]] = incoming
                    new_rows.setdefault(records.partitions[i], []).append(i)
            if dupes and on_duplicate == FAIL:
                raise DuplicateKeys(
                    f"insert into {table.uri}: {len(dupes)} key(s) already in the table, e.g. "
                    f"{', '.join(sorted(dupes)[:5])} (upsert them, or insert with "
                    "on_duplicate='drop')",
                    sorted(dupes),
                )
        if deletes is not None:
            dbatch = prepare_batch(deletes, props, t, upsert=False)
            drecords = _records(dbatch)
            position = {ident: i for i, ident in enumerate(drecords.ids)}
            for ident, (sl, stored) in plan.locate(dbatch).items():
                i = position[ident]
                has = drecords.ordering is not None
                incoming = drecords.ordering[i] if drecords.ordering is not None else None
                if incoming_wins(stored, incoming, props, has_ordering=has):
                    plan.delta(sl).deletes[ident.split("\x00", 1)[-1]] = incoming if has else stored
        if where is not None:
            order = props.ordering_field
            for sl in plan.slices.values():
                rows = read_slice(table.store, sl, schema)
                plan.files_read += 1
                hits = filter_matches(rows, where) if rows.num_rows else []
                if not hits:
                    continue
                picked = rows.take(pa.array(hits, pa.int64()))
                keys = picked.column(RECORD_KEY_COL).to_pylist()
                values = (
                    picked.column(order).to_pylist()
                    if order and order in picked.column_names
                    else [None] * len(keys)
                )
                d = plan.delta(sl)
                for k, v in zip(keys, values, strict=True):
                    d.deletes[k] = v
        if on_plan is not None:
            on_plan(plan)
        s = table.settings
        incoming_rows = batch.rows if batch is not None else None
        logs = []
        for group in sorted(plan.deltas):
            d = plan.deltas[group]
            if not d.upserts and not d.deletes:
                continue
            rows = _block(d, incoming_rows, schema, props, t)
            key = txn.data_key(d.sl.partition, log_name(group, t))
            lf = write_log(
                table.store, key, rows, instant=t, file_group=group, partition=d.sl.partition
            )
            logs.append(lf.to_json())
            crash.point(f"{DELTA_COMMIT}.log_written")
        stats = []
        if incoming_rows is not None:
            per_file = _rows_per_file(plan.slices.values(), s.parquet_max_file_size)
            for partition, positions in sorted(new_rows.items()):
                for k in range(0, len(positions), per_file):
                    piece = conform(
                        incoming_rows.take(pa.array(positions[k : k + per_file], pa.int64())),
                        schema,
                    )
                    f, stat = _new_base(txn, partition, piece, s.bloom_index_fpp)
                    txn.add(f)
                    stats.append(stat)
        details = {
            WRITE_STATS: stats,
            LOG_FILES: logs,
            "keyed": {"files_read": plan.files_read, "properties": props.to_json()},
        }
        return txn.commit(metadata, details)
    except BaseException:
        txn.abort()
        raise


def _rows_per_file(slices: Any, max_size: int) -> int:
    bases: Sequence[DataFile] = [sl.base for sl in slices]
    rows = sum(f.rows for f in bases)
    size = sum(f.size for f in bases if f.rows)
    record = max(1, size // rows) if rows else 1024
    return max(1, max_size // record)
