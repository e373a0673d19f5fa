"""The copy-on-write writer's steps for an engine that distributes them (Spark).

`keyed_write` runs a keyed commit in one process. An engine splits the same steps over its
tasks: the driver plans (`plan_keyed_write`: the state the write reads, the index inputs and the
target schema, all picklable and small), tasks compute each record's key
(`record_columns`), ask the index for candidate files (`KeyedWritePlan.index`), read each
candidate file's keys once (`locate_in_file`), and rewrite each touched file group as a new
slice with a `TaskWriter` (`write_slice`); the driver places new records
(`place_inserts`, Hudi's small-file handling, from per-partition counts) and commits the
slices with their write stats (`commit_keyed`). Every rule (merge mode, deletes, small files,
partition moves) is the one `keyed_write` applies; see docs/tables.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import ObjectStore

from ...engine_commit import sweep_strays
from ...errors import WriterNotSupported
from ...file_groups.sidecars import WRITE_STATS
from ...instant import Instant
from ...layout import heartbeat_key
from ...metadata import DataFile
from ...parquet_io import read_files
from ...schema import merge_schemas
from ..index import RangeBloomIndex, range_bloom_index, write_stats_by_path
from ..keys import (
    META_COLUMNS,
    RECORD_KEY_COL,
    identities,
    partition_paths,
    record_keys,
    typed_keys,
    with_meta,
)
from ..merge import incoming_wins
from ..properties import GLOBAL, MERGE_ON_READ, KeyedProperties
from .planning import plan_on
from .sizing import avg_record_size, fill_small_files
from .slice_writer import base_rows, encode_slice, new_rows, slice_stats

if TYPE_CHECKING:
    from ...task_writer import TaskWriter
    from ...txn import Transaction
    from ..context import KeyedTable


@dataclass(frozen=True)
class KeyedWritePlan:
    """What every task of one distributed keyed write needs (picklable)."""

    instant_time: str
    props: KeyedProperties
    #: The schema the new slices are written in (the table's, merged with the batch's).
    schema: pa.Schema
    #: The schema stored files are read in (the table's as planned on).
    table_schema: pa.Schema | None
    #: The snapshot's files the write planned on (latest slice of every file group).
    files: tuple[DataFile, ...]
    #: Write stats of those files (key ranges, bloom filters): the index's inputs.
    stats: Mapping[str, Mapping[str, Any]]
    integer_key: str | None
    bloom_fpp: float
    small_file_limit: int
    parquet_max_file_size: int
    record_size_estimate: int
    #: Rows per row group of the slices written (TableSettings.parquet_row_group_rows).
    row_group_rows: int
    #: keyed/write/sizing.py: a small file takes new records only while its size is at most this
    #: many
    #: times the bytes routed into it (TableSettings.small_file_rewrite_ratio).
    small_file_rewrite_ratio: float = float("inf")
    by_group: Mapping[str, DataFile] = field(default_factory=dict)

    def index(self, store: ObjectStore) -> RangeBloomIndex:
        """The range/bloom index over the planned snapshot (sidecar filters read from `store`)."""
        return RangeBloomIndex(self.stats, store, self.integer_key)

    def scope(self, partition: str) -> list[DataFile]:
        """The files a record of `partition` may be stored in (every file for global keys)."""
        if self.props.key_scope == GLOBAL:
            return list(self.files)
        return [f for f in self.files if f.partition == partition]

    def base(self, group: str) -> DataFile | None:
        """The slice a rewrite of `group` supersedes (None: a new file group)."""
        return self.by_group.get(group)


def check_engine_write(props: KeyedProperties, uri: str) -> None:
    """Refuse a merge-on-read table (`WriterNotSupported`) in the copy-on-write engine plan:
    it builds each touched file group's new slice from its base file alone, while a
    merge-on-read group's records are its base merged with its logs, so rewriting from the
    base would revert them. Merge-on-read tables take `plan_delta_write` (engine_delta.py)."""
    if props.table_type == MERGE_ON_READ:
        raise WriterNotSupported(
            f"{uri} is a merge_on_read table: plan its write with plan_delta_write (delta "
            "commits), not plan_keyed_write, which rewrites file groups from their base files"
        )


def plan_keyed_write(
    table: KeyedTable, txn: Transaction, props: KeyedProperties, incoming: pa.Schema | None
) -> KeyedWritePlan:
    """Plan a keyed write after `begin`: the state it reads (completions it does not see are
    validated at commit, as for `keyed_write`), and the schema of the new slices
    (`incoming`: the batch's columns, without meta columns; None for a delete)."""
    check_engine_write(props, table.uri)
    st = table.state()
    plan_on(txn, st)
    schema = st.schema()
    target = schema
    if incoming is not None:
        metas = pa.schema([(c, pa.string()) for c in META_COLUMNS])
        body = [f for f in incoming if f.name not in META_COLUMNS]
        target = merge_schemas(schema, pa.schema([*metas, *body]), table.uri)
    if target is None:
        target = pa.schema([(c, pa.string()) for c in META_COLUMNS])
    txn.schema = target
    files = tuple(st.snapshot().files)
    index = range_bloom_index(table.store, st, props)
    integer_key = index.integer_key if isinstance(index, RangeBloomIndex) else None
    live = {f.path for f in files}
    s = table.settings
    return KeyedWritePlan(
        instant_time=txn.instant_time,
        props=props,
        schema=target,
        table_schema=schema,
        files=files,
        stats={p: v for p, v in write_stats_by_path(st).items() if p in live},
        integer_key=integer_key,
        bloom_fpp=s.bloom_fpp(props.table_type == MERGE_ON_READ),
        small_file_limit=s.small_file_limit,
        parquet_max_file_size=s.parquet_max_file_size,
        record_size_estimate=s.copy_on_write_record_size_estimate,
        row_group_rows=s.parquet_row_group_rows,
        small_file_rewrite_ratio=s.small_file_rewrite_ratio,
        by_group={f.group: f for f in files},
    )


def record_columns(
    data: pa.Table, props: KeyedProperties, *, upsert: bool, schema: pa.Schema | None = None
) -> tuple[list[str], list[str], list[str]]:
    """(record key text, partition path, record identity) of each row, as `keyed_write`
    names them (a delete with global keys looks everywhere: its partition is empty; its
    keys are first cast to the types of the table's `schema`, `typed_keys`)."""
    if not upsert:
        data = typed_keys(data, schema, props)
    keys = record_keys(data, props)
    if props.key_scope == GLOBAL and not upsert:
        parts = [""] * data.num_rows
    else:
        parts = partition_paths(data, props)
    return keys, parts, identities(keys, parts, props)


@dataclass(frozen=True)
class Hit:
    """A record the table holds: where, and whether the incoming version replaces it."""

    position: int  # in the probed keys
    row: int  # in the file
    wins: bool


def locate_in_file(
    store: ObjectStore,
    plan: KeyedWritePlan,
    f: DataFile,
    keys: Sequence[str],
    ordering: Sequence[Any] | None,
    *,
    has_ordering: bool,
) -> list[Hit]:
    """Read one candidate file's key (and ordering) column and find `keys` in it; `ordering`
    holds the incoming versions' ordering values (merge mode event_time)."""
    columns = [RECORD_KEY_COL]
    order_col = plan.props.ordering_field
    schema = plan.table_schema
    if order_col and schema is not None and order_col in schema.names:
        columns.append(order_col)
    data = read_files(store, [f], columns, schema)
    if data is None or data.num_rows == 0:
        return []
    stored = data.column(RECORD_KEY_COL)
    rows = pc.indices_nonzero(pc.is_in(stored, value_set=pa.array(list(keys), pa.string())))
    hit_keys = stored.take(rows).to_pylist()
    if len(columns) > 1:
        hit_order = data.column(columns[1]).take(rows).to_pylist()
    else:
        hit_order = [None] * len(hit_keys)
    position = {k: i for i, k in enumerate(keys)}
    out = []
    for row, key, stored_value in zip(rows.to_pylist(), hit_keys, hit_order, strict=True):
        i = position[key]
        incoming = ordering[i] if ordering is not None else None
        wins = incoming_wins(stored_value, incoming, plan.props, has_ordering=has_ordering)
        out.append(Hit(i, int(row), wins))
    return out


@dataclass(frozen=True)
class Placement:
    """New records of one partition, by their rank there (0-based, batch order), go to
    `group` for ranks in [start, end)."""

    partition: str
    start: int
    end: int
    group: str


def place_inserts(
    plan: KeyedWritePlan, counts: Mapping[str, int], rewritten: Collection[str] = ()
) -> list[Placement]:
    """Where new records go (small files first, by the rule of keyed/write/sizing.py, then new file
    groups of about `parquet_max_file_size`), from the number of new records per partition;
    the same rule as `keyed_write`. `rewritten`: file groups the write rewrites anyway."""
    record_size = avg_record_size(plan.files, plan.record_size_estimate)
    per_file = max(1, plan.parquet_max_file_size // record_size)
    out: list[Placement] = []
    for partition, count in sorted(counts.items()):
        done = 0
        fills = fill_small_files(
            [f for f in plan.files if f.partition == partition],
            count,
            record_size=record_size,
            small_file_limit=plan.small_file_limit,
            rewrite_ratio=plan.small_file_rewrite_ratio,
            rewritten=rewritten,
        )
        for fill in fills:
            out.append(Placement(partition, done, done + fill.records, fill.group))
            done += fill.records
        while done < count:
            take = min(per_file, count - done)
            out.append(Placement(partition, done, done + take, f"{uuid.uuid4()}-0"))
            done += take
    return out


def write_slice(
    writer: TaskWriter,
    plan: KeyedWritePlan,
    group: str,
    partition: str,
    drop: Iterable[int],
    body: pa.Table | None,
    keys: Sequence[str],
    counts: tuple[int, int, int],
) -> tuple[DataFile, dict[str, Any]] | None:
    """Write file group `group`'s new slice: its base slice's rows less `drop`, then the
    incoming records `body` (their columns, no meta columns) with record keys `keys`;
    returns the file and its write stats (None when the write was finished meanwhile, see
    `TaskWriter`). `counts`: inserts, updates, deletes."""
    base = plan.base(group)
    n = plan.row_group_rows
    parts: list[Iterator[pa.Table]] = []
    if base is not None:
        parts.append(base_rows(writer.store, base, set(drop), plan.schema, n))
        partition = base.partition
    if body is not None and body.num_rows:
        incoming = with_meta(body, plan.instant_time, keys)
        parts.append(new_rows(incoming, list(range(incoming.num_rows)), plan.schema, n))
    written = encode_slice(chain.from_iterable(parts), plan.schema, n)
    # One name per task attempt: a retried or speculative attempt never overwrites a slice
    # another attempt may have had committed.
    name = f"{group}_{writer.task}_{plan.instant_time}.parquet"
    f = writer.write_body(written.body, partition, file_group=group, name=name)
    if f is None:
        return None
    return f, slice_stats(writer.store, f, written, base, counts, plan.bloom_fpp)


def commit_keyed(
    txn: Transaction,
    plan: KeyedWritePlan,
    files: Sequence[DataFile],
    stats: Sequence[Mapping[str, Any]],
    *,
    files_read: int | None = None,
    extra_metadata: Mapping[str, str] | None = None,
    sweep: bool = False,
    heartbeat_written: bool = False,
) -> Instant:
    """Complete a distributed keyed write with exactly `files` and their write stats (the
    keyed counterpart of `commit_files`). With `sweep`, objects under the instant's prefix
    that neither a file nor a bloom sidecar of it names are deleted first (failed attempts)."""
    store = txn.table.store
    keep = {f.path for f in files} | {str(s["bloom_path"]) for s in stats if s.get("bloom_path")}
    try:
        if sweep:
            sweep_strays(store, txn.instant_time, keep)
        txn.add(*files)
    except BaseException:
        txn.abort()
        raise
    details = {
        WRITE_STATS: [dict(s) for s in sorted(stats, key=lambda s: str(s["file_group"]))],
        "keyed": {"files_read": files_read, "properties": plan.props.to_json()},
    }
    instant = txn.commit(extra_metadata, details)
    if sweep:
        sweep_strays(store, txn.instant_time, keep)
    if heartbeat_written:
        store.delete(heartbeat_key(txn.instant_time))
    return instant


__all__ = [
    "Hit",
    "KeyedWritePlan",
    "Placement",
    "check_engine_write",
    "commit_keyed",
    "locate_in_file",
    "place_inserts",
    "plan_keyed_write",
    "record_columns",
    "write_slice",
]
