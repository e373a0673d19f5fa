"""The record-level index (Hudi's RLI): record key -> file group, read without listing.

The index as of a table state is folded from the commit log, like the table itself:

- **base shards**: the latest completed `indexing` entry names immutable Parquet shards
  (`key`, `partition`, `file_group`), range-partitioned by key and sorted by it, each with its
  checksum, key range and row count; row groups (`record_index_row_group_keys` rows) are
  the block index a lookup uses to decode only the blocks that may hold its keys;
- **delta shards**: every keyed commit after it (while an index exists) writes the keys it
  inserted, moved or deleted (`file_group` null) into one small Parquet file under its own data
  prefix and names it, with its checksum, in its commit metadata (`record_index_delta`);
- **untracked groups**: a write after the base that carries no delta (a writer that planned
  before the index existed, insert_overwrite, clustering) is not trusted key by key: the file
  groups it touched are looked up with their key ranges and bloom filters instead.

A key's file group is the last of these to name it; a group no longer in the snapshot holds
nothing. A rollback or restore of a write the base covered makes the index stale (the table
falls back to ranges and blooms until the next `indexing` run).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage import IntegrityError, NotFound, ObjectStore, checksum_of, verify

from ...file_groups.log_files import logs_of
from ...instant import INDEXING, RESTORE, ROLLBACK, parse_name
from ...metadata import DataFile, Entry
from ...settings import KeyedIndex, TableSettings
from ...snapshot import TableState
from ..policies import KeyScope
from ..properties import KeyedProperties
from .ranges import KeyIndex, RangeBloomIndex, range_bloom_index

#: Commit-metadata field of an indexing entry (the base) and of a keyed commit (its delta).
RECORD_INDEX = "record_index"
RECORD_INDEX_DELTA = "record_index_delta"
INDEX_SCHEMA = pa.schema(
    [("key", pa.string()), ("partition", pa.string()), ("file_group", pa.string())]
)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardRef:
    path: str
    checksum: str
    rows: int
    min_key: str | None
    max_key: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "checksum": self.checksum,
            "rows": self.rows,
            "min_key": self.min_key,
            "max_key": self.max_key,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> ShardRef:
        return ShardRef(
            str(d["path"]), str(d["checksum"]), int(d["rows"]), d.get("min_key"), d.get("max_key")
        )


@dataclass(frozen=True)
class IndexView:
    """What a lookup as of one table state reads: base shards, then deltas in completion
    order, and the groups of writes that left no delta."""

    instant: str
    covered_seq: int
    shards: tuple[ShardRef, ...]
    deltas: tuple[ShardRef, ...]
    untracked: frozenset[str]


def latest_index_entry(st: TableState) -> Entry | None:
    found = [e for e in st.entries if e.action == INDEXING and RECORD_INDEX in e.metadata]
    return max(found, key=lambda e: e.seq) if found else None


def _rolled_back_covered(st: TableState, covered_seq: int) -> bool:
    """Whether a rollback or restore completed after `covered_seq` undid a write it covers."""
    for e in st.entries:
        if e.seq <= covered_seq or e.action not in (ROLLBACK, RESTORE):
            continue
        if e.action == ROLLBACK and e.metadata.get("target_state") != "completed":
            continue
        for name in e.rolled_back:
            gone = parse_name(name)
            if gone.seq is not None and gone.seq <= covered_seq:
                return True
    return False


def touched_groups(e: Entry, st: TableState) -> set[str]:
    """File groups a write added to or replaced (whole replaced partitions included)."""
    groups = {f.group for f in e.added} | {f.group for f in e.replaced}
    if e.replaced_partitions:
        for g, fs in st.file_slices(e.seq - 1).items():
            if fs[-1].partition in e.replaced_partitions:
                groups.add(g)
    return groups


def index_view(st: TableState) -> IndexView | None:
    """The record-level index as of `st`; None when none was built or it is stale."""
    e = latest_index_entry(st)
    if e is None:
        return None
    meta = e.metadata[RECORD_INDEX]
    covered = int(meta["covered_seq"])
    if _rolled_back_covered(st, covered):
        return None
    deltas: list[ShardRef] = []
    untracked: set[str] = set()
    for w in st.ordered_writes():
        if w.seq <= covered:
            continue
        d = w.metadata.get(RECORD_INDEX_DELTA)
        if d is not None:
            if int(d.get("rows", 0)):  # an empty delta (updates in place) has no object
                deltas.append(ShardRef.from_json(d))
            continue
        if w.added or w.replaced or w.replaced_partitions:
            untracked |= touched_groups(w, st)
        # A merge-on-read delta commit without a delta (its writer planned before the index
        # existed): the keys its logs insert or delete change what their groups hold, so the
        # index no longer speaks for those groups.
        untracked |= {lf.file_group for lf in logs_of(w.metadata)}
    shards = tuple(ShardRef.from_json(s) for s in meta["shards"])
    return IndexView(e.time, covered, shards, tuple(deltas), frozenset(untracked))


# -- shard files -------------------------------------------------------------------------
def shard_bytes(rows: pa.Table, row_group_keys: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(
        rows.select(INDEX_SCHEMA.names).cast(INDEX_SCHEMA),
        buf,
        row_group_size=max(1, row_group_keys),
        compression="zstd",
        write_statistics=["key"],
    )
    return buf.getvalue()


def put_shard(store: ObjectStore, path: str, rows: pa.Table, row_group_keys: int) -> ShardRef:
    """Write one shard (rows sorted by key) and describe it for the commit metadata."""
    body = shard_bytes(rows, row_group_keys)
    store.put(path, body)
    if rows.num_rows:
        mm = pc.min_max(rows.column("key"))
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
    else:
        lo = hi = None
    return ShardRef(path, checksum_of(body), rows.num_rows, lo, hi)


def write_delta(
    store: ObjectStore,
    path: str,
    changes: Sequence[tuple[pa.Array, pa.Array, pa.Array]],
    settings: TableSettings,
) -> dict[str, Any]:
    """A commit's delta shard from its (keys, partitions, file groups) changes (file group
    null: deleted); what the commit metadata names (`{"rows": 0}` when nothing changed)."""
    if not sum(len(k) for k, _, _ in changes):
        return {"rows": 0}  # only records in place changed: still known to the index
    rows = pa.table(
        {
            "key": pa.concat_arrays([k.cast(pa.string()) for k, _, _ in changes]),
            "partition": pa.concat_arrays([p for _, p, _ in changes]),
            "file_group": pa.concat_arrays([g for _, _, g in changes]),
        }
    ).sort_by([("key", "ascending"), ("partition", "ascending")])
    return put_shard(store, path, rows, settings.record_index_row_group_keys).to_json()


def read_shard(
    store: ObjectStore, ref: ShardRef, keys: pa.Array | None = None
) -> tuple[pa.Table, int]:
    """A shard's rows (only those whose key is in `keys`, when given; the row groups whose
    key range holds none of them are not decoded) and the number of row groups decoded."""
    data = store.get(ref.path)
    verify(data, ref.checksum, store.url(ref.path))
    pf = pq.ParquetFile(pa.BufferReader(data))
    groups = list(range(pf.metadata.num_row_groups))
    if keys is not None:
        wanted = np.asarray(keys.to_numpy(zero_copy_only=False), dtype=object)
        wanted.sort()
        chosen = []
        for g in groups:
            st = pf.metadata.row_group(g).column(0).statistics
            if st is None or not st.has_min_max:
                chosen.append(g)
                continue
            lo = np.searchsorted(wanted, st.min, "left")
            hi = np.searchsorted(wanted, st.max, "right")
            if hi > lo:
                chosen.append(g)
        groups = chosen
    if not groups:
        return INDEX_SCHEMA.empty_table(), 0
    rows = pf.read_row_groups(groups, use_threads=False).cast(INDEX_SCHEMA)
    if keys is not None:
        rows = rows.filter(pc.is_in(rows.column("key"), value_set=keys))
    return rows, len(groups)


def identity(rows: pa.Table, props: KeyedProperties) -> pa.Array:
    """What names a record in the index: its key (global) or partition and key."""
    key = rows.column("key").combine_chunks()
    if props.key_scope == KeyScope.GLOBAL:
        return key
    part = rows.column("partition").combine_chunks()
    return pc.binary_join_element_wise(part, key, "\x00")


def apply_delta(mapping: pa.Table, delta: pa.Table, props: KeyedProperties) -> pa.Table:
    """`mapping` with `delta`'s records replaced (file_group null: deleted)."""
    if delta.num_rows == 0:
        return mapping
    gone = pc.is_in(identity(mapping, props), value_set=identity(delta, props))
    kept = mapping.filter(pc.invert(gone))
    added = delta.filter(pc.is_valid(delta.column("file_group")))
    return pa.concat_tables([kept.cast(INDEX_SCHEMA), added.cast(INDEX_SCHEMA)])


# -- lookups -----------------------------------------------------------------------------
class RecordLevelIndex:
    """Key -> file group from the index's shards; writes without a delta since the base are
    looked up through their files' ranges and blooms (`fallback`)."""

    def __init__(
        self, store: ObjectStore, view: IndexView, props: KeyedProperties, fallback: KeyIndex
    ) -> None:
        self.store = store
        self.view = view
        self.props = props
        self.fallback = fallback
        self.shards_read = 0  # index objects fetched (base shards and deltas)
        self.blocks_read = 0  # row groups of base shards decoded
        self.probed_files = 0
        #: The object that failed its read (missing or damaged), once one did: the index is
        #: derived data, so this write finds its keys through `fallback` instead.
        self.damaged: str | None = None

    def lookup(self, keys: pa.Array) -> pa.Table:
        """The index rows (key, partition, file_group) of `keys`, as of the view."""
        keys = pc.unique(keys)
        sorted_keys = np.sort(np.asarray(keys.to_numpy(zero_copy_only=False), dtype=object))
        parts = []
        for ref in self.view.shards:
            if ref.rows == 0 or ref.min_key is None or ref.max_key is None:
                continue
            lo = np.searchsorted(sorted_keys, ref.min_key, "left")
            hi = np.searchsorted(sorted_keys, ref.max_key, "right")
            if hi <= lo:
                continue  # no key of the batch in this shard's range: not fetched
            rows, blocks = read_shard(self.store, ref, keys)
            self.shards_read += 1
            self.blocks_read += blocks
            parts.append(rows)
        mapping = pa.concat_tables(parts) if parts else INDEX_SCHEMA.empty_table()
        for ref in self.view.deltas:
            delta, _ = read_shard(self.store, ref, keys)
            self.shards_read += 1
            mapping = apply_delta(mapping, delta, self.props)
        return mapping

    def candidates(self, files: Sequence[DataFile], keys: Sequence[str]) -> dict[str, list[int]]:
        if self.damaged is None:
            try:
                return self._candidates(files, keys)
            except (IntegrityError, NotFound) as exc:
                self.damaged = exc.uri or str(exc)
                log.warning(
                    "record index of %s is damaged (%s): this write finds its keys through "
                    "key ranges and bloom filters; `flowledger table check --repair` rebuilds "
                    "the index",
                    self.view.instant,
                    exc,
                )
        return self.fallback.candidates(files, keys) if keys and files else {}

    def _candidates(self, files: Sequence[DataFile], keys: Sequence[str]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        if not keys or not files:
            return out
        untracked = [f for f in files if f.group in self.view.untracked]
        # A group's files: one base file, or (merge-on-read, keyed/index/merge_on_read.py)
        # its base and then the key ranges of its logs; the first answers for the group.
        tracked: dict[str, list[DataFile]] = {}
        for f in files:
            if f.group not in self.view.untracked:
                tracked.setdefault(f.group, []).append(f)
        if tracked and len(keys):
            # Keys outside every file's key range are in no file (time-ordered new keys):
            # only the others are looked up in the shards.
            pos = np.arange(len(keys), dtype=np.int64)
            if isinstance(self.fallback, RangeBloomIndex):
                every = [f for fs in tracked.values() for f in fs]
                pos = pos[self.fallback.in_some_range(every, keys)]
            probe = pa.table(
                {
                    "key": pa.array([keys[i] for i in pos.tolist()], pa.string()),
                    "pos": pa.array(pos),
                }
            )
            found = self.lookup(probe.column("key").combine_chunks())
            groups = pa.array(list(tracked), pa.string())
            found = found.filter(pc.is_in(found.column("file_group"), value_set=groups))
            hits = probe.join(found.select(["key", "file_group"]), "key", join_type="inner")
            if hits.num_rows:
                hits = hits.sort_by([("file_group", "ascending"), ("pos", "ascending")])
                g = hits.column("file_group").to_pylist()
                p = hits.column("pos").to_numpy()
                starts = np.flatnonzero(np.r_[True, np.array(g[1:]) != np.array(g[:-1])])
                ends = np.r_[starts[1:], len(g)]
                for s, e in zip(starts, ends, strict=True):
                    f = tracked[g[s]][0]
                    out[f.path] = sorted(set(p[s:e].tolist()))
            self.probed_files += len(out)
        if untracked:
            for path, more in self.fallback.candidates(untracked, keys).items():
                out[path] = sorted(set(out.get(path, [])) | set(more))
        return out


def choose_index(mode: KeyedIndex | str) -> Any:
    """The index factory for the `keyed_index` setting: `record_level` and `auto` use the
    record-level index when one is built and current (else ranges and blooms)."""

    def factory(store: ObjectStore, st: TableState, props: KeyedProperties) -> KeyIndex:
        fallback = range_bloom_index(store, st, props)
        if KeyedIndex.parse(mode) == KeyedIndex.RANGE_BLOOM:
            return fallback
        view = index_view(st)
        if view is None:
            return fallback
        return RecordLevelIndex(store, view, props, fallback)

    return factory


__all__ = [
    "INDEX_SCHEMA",
    "RECORD_INDEX",
    "RECORD_INDEX_DELTA",
    "IndexView",
    "RecordLevelIndex",
    "ShardRef",
    "apply_delta",
    "choose_index",
    "index_view",
    "put_shard",
    "read_shard",
    "write_delta",
]
