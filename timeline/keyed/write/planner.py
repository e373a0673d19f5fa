"""The array-level planner every keyed write shares, copy-on-write and merge-on-read alike.

It prepares the batch (record keys, identities, partitions, ordering values; duplicates
combined by the merge mode) and locates the records the table already holds: the index
names the candidate files, whose key (and ordering) columns are read concurrently and
matched against the batch with pyarrow joins, never record by record. What the batch then
does to each located record is decided over whole arrays in keyed/write/decide.py; the copy-on-write
writer (keyed/write/copy_on_write.py) turns those decisions into rewritten file slices, the
merge-on-read writer
(keyed/write/merge_on_read.py) into log blocks.

On a merge-on-read table a candidate "file" is its file group's latest slice, base merged
with its logs (keyed/read/slices.py), so a key updated or deleted in a log is seen as it is now; the
merge-on-read writer reads candidates only for the keys the index cannot place in exactly
one file group (keyed/write/routing.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...file_groups import FileSlice
from ...metadata import DataFile
from ...parquet_io import read_files, read_verified
from ...schema import conform
from ...snapshot import TableState
from ..index import (
    BloomFilter,
    IndexFactory,
    IndexView,
    KeyIndex,
    RangeBloomIndex,
    RecordLevelIndex,
    SliceIndex,
    choose_index,
    index_view,
)
from ..inflight import bounded_map
from ..keys import RECORD_KEY_COL, integer_key_column, partition_path_array, record_keys, with_meta
from ..log import LogCache
from ..merge import combine_rows, distinct_integers
from ..policies import KeyScope, MergeMode, OnDuplicate
from ..properties import KeyedProperties, PropertiesError
from ..read import READ_PARALLELISM, read_slice
from .base_stream import held_bytes, ranged
from .key_chunks import Matches, matching_rows, whole_matches
from .located import LocatedBytes

if TYPE_CHECKING:
    from ..context import KeyedTable

FAIL, DROP = OnDuplicate.FAIL, OnDuplicate.DROP  # what an insert does with a stored key

#: Candidate files whose keys one write reads at once (GETs in flight; each holds a small
#: file's bytes, or a piece of a big file's key and ordering chunks, while they are
#: decoded).
LOCATE_PARALLELISM = 8
#: The bytes those reads hold at once (a small file's size, `STREAM_MIN` for one read in
#: ranges), at most: a constant rather than `write_inflight_bytes`, so that the locate
#: step's working set stays the same as files grow with the table (8 files of 2.4 MiB at
#: 10M rows in the upsert benchmark, 3 of 13 MiB at 50M, not 8).
LOCATE_INFLIGHT_BYTES = 48 * 1024 * 1024


@dataclass
class Batch:
    """Incoming records after combining duplicates (arrays aligned with `rows`)."""

    rows: pa.Table  # upserts: with meta columns; deletes: the given columns
    keys: pa.Array  # record keys as text
    partitions: pa.Array
    ordering: pa.Array | None


def _key_array(data: pa.Table, props: KeyedProperties) -> pa.Array:
    if len(props.record_key) == 1:
        (c,) = props.record_key
        if c in data.column_names:
            col = data.column(c)
            plain = pa.types.is_integer(col.type) or pa.types.is_string(col.type)
            if plain and not col.null_count:
                return pc.cast(col, pa.string()).combine_chunks()  # as record_keys words it
    return pa.array(record_keys(data, props), pa.string())


def _distinct_integer_key(data: pa.Table, props: KeyedProperties) -> bool:
    if len(props.record_key) != 1 or props.record_key[0] not in data.column_names:
        return False
    col = data.column(props.record_key[0])
    return pa.types.is_integer(col.type) and not col.null_count and distinct_integers(col)


def prepare_batch(data: pa.Table, props: KeyedProperties, instant: str, *, upsert: bool) -> Batch:
    keys = _key_array(data, props)
    if props.key_scope == KeyScope.GLOBAL and not upsert:
        parts = pa.array([""] * data.num_rows, pa.string())  # a global key names its record
    else:  # wherever it lives
        parts = partition_path_array(data, props)
    ordering = None
    if props.ordering_field and props.ordering_field in data.column_names:
        ordering = data.column(props.ordering_field).combine_chunks()
    elif upsert and props.merge_mode == MergeMode.EVENT_TIME:
        raise PropertiesError(
            f"merge mode event_time needs the ordering field {props.ordering_field!r} "
            "in the written data"
        )
    # Distinct keys make distinct identities in either scope: checked on the integer column
    # when the key is one (cheaper than joining partition and key as text, then hashing it).
    if not _distinct_integer_key(data, props):
        ids = (
            keys
            if props.key_scope == KeyScope.GLOBAL
            else pc.binary_join_element_wise(parts, keys, "\x00")
        )
        keep = combine_rows(ids, ordering, props)
        del ids
        if len(keep) != data.num_rows:
            idx = pa.array(keep, pa.int64())
            data = data.take(idx)
            keys, parts = keys.take(idx), parts.take(idx)
            ordering = ordering.take(idx) if ordering is not None else None
    rows = with_meta(data, instant, keys) if upsert else data
    return Batch(rows, keys, parts, ordering)


def by_partition(partitions: pa.Array, rows: np.ndarray) -> dict[str, np.ndarray]:
    """`rows` (ascending, one per entry of `partitions`) by the partition path at their
    entry, each still ascending, in the order the paths first occur: one stable sort of the
    paths' codes (Arrow's counting sort for a small range of integers), not a pass over
    every row per partition (a load of 20 partitions spent more on that than on deciding)."""
    codes = pc.dictionary_encode(partitions)
    if isinstance(codes, pa.ChunkedArray):
        codes = codes.combine_chunks()
    names = codes.dictionary.to_pylist()
    counts = np.bincount(codes.indices.to_numpy(zero_copy_only=False), minlength=len(names))
    grouped = rows[pc.array_sort_indices(codes.indices).to_numpy()]
    bounds = np.r_[0, np.cumsum(counts)]
    return {str(p): grouped[bounds[c] : bounds[c + 1]].copy() for c, p in enumerate(names)}


def _no_hits() -> pa.Table:
    empty = pa.array([], pa.int64())
    return pa.table({"pos": empty, "file": empty, "row": empty})


class Planner:
    """The state one keyed write plans on: the files (latest slice of every file group) its
    records may be stored in, the index over them, and how their rows are read."""

    def __init__(
        self,
        table: KeyedTable,
        props: KeyedProperties,
        st: TableState,
        index: IndexFactory | None,
        *,
        merge_on_read: bool = False,
    ) -> None:
        self.table = table
        self.props = props
        self.st = st
        self.schema = st.schema()
        #: The table's single integer record key column, keys matched as its numbers (None:
        #: as the record key text); and the false-positive rate of the filters this write
        #: builds (TableSettings.bloom_fpp, by table type).
        self.key_col = integer_key_column(props, self.schema)
        self.bloom_fpp = table.settings.bloom_fpp(merge_on_read)
        #: merge-on-read: file group -> its latest slice (base plus logs); None: copy-on-write
        self.slices: dict[str, FileSlice] | None = None
        #: The record-level index, if one exists: the commit then records its key changes
        #: (either table type), so the index stays current for the groups it touches.
        self.record_index: IndexView | None = index_view(st)
        if merge_on_read:
            self.slices = st.latest_slices()
            self.files: Sequence[DataFile] = [sl.base for sl in self.slices.values()]
            # a slice may hold a key in its base or in a log (keyed/index/merge_on_read.py)
            inner = (index or choose_index(table.settings.keyed_index))(table.store, st, props)
            self.index: KeyIndex = SliceIndex(
                inner,
                self.slices,
                record_base_hits=index is None and not isinstance(inner, RecordLevelIndex),
            )
        else:
            self.files = st.snapshot().files
            factory = index or choose_index(table.settings.keyed_index)
            self.index = factory(table.store, st, props)
        self.files_read = 0  # files (slices) whose keys were read to find the batch's records
        self.log_cache: LogCache | None = None  # merge-on-read: the logs `locate` reads
        #: Row groups of copy-on-write files `locate` read in ranges, and those it skipped by
        #: their key statistics (keyed/write/key_chunks.py).
        self.row_groups_read = 0
        self.row_groups_skipped = 0
        self._count_lock = threading.Lock()
        #: Small copy-on-write files `locate` fetched whole and found records in, kept for
        #: their rewrite within a fixed budget (keyed/write/located.py).
        self.located = LocatedBytes(0 if merge_on_read else table.settings.located_bytes_budget)

    def rows_of(
        self, f: DataFile, columns: Sequence[str] | None = None, *, parallelism: int = 1
    ) -> pa.Table:
        """A file's rows (or some columns) in the table's schema, merged with its logs on a
        merge-on-read table (`parallelism`: its objects fetched at once); nothing is kept."""
        if self.slices is not None:
            sl = self.slices[f.group]
            return read_slice(
                self.table.store,
                sl,
                self.schema,
                columns,
                parallelism=parallelism,
                cache=self.log_cache,
                key_col=self.key_col,
            )
        return read_files(self.table.store, [f], columns, self.schema) or pa.table({})

    def _scopes(self, batch: Batch) -> list[tuple[list[int], np.ndarray]]:
        """(file indexes, batch positions) pairs: where each batch record may be stored."""
        n = len(batch.keys)
        if self.props.key_scope == KeyScope.GLOBAL:
            return [(list(range(len(self.files))), np.arange(n, dtype=np.int64))]
        scopes = []
        for p, pos in by_partition(batch.partitions, np.arange(n, dtype=np.int64)).items():
            fidx = [k for k, f in enumerate(self.files) if f.partition == p]
            scopes.append((fidx, pos))
        return scopes

    def _ranges(self) -> RangeBloomIndex | None:
        """The key ranges of a copy-on-write table's files, when its index keeps them (a
        merge-on-read slice may hold keys beyond its base file's range, in its logs)."""
        if self.slices is not None:
            return None
        if isinstance(self.index, RangeBloomIndex):
            return self.index
        if isinstance(self.index, RecordLevelIndex):
            fallback = self.index.fallback
            return fallback if isinstance(fallback, RangeBloomIndex) else None
        return None

    def known_filter(self, f: DataFile) -> BloomFilter | None:
        """The bloom filter of copy-on-write file `f` when the index holds it already (inline
        or a sidecar it fetched for this write), for a rewrite that only removes rows to keep
        instead of hashing the kept keys again; None otherwise."""
        ranges = self._ranges()
        return ranges.known_filter(f) if ranges is not None else None

    def _range_keys(self, batch: Batch, positions: np.ndarray, numbers: bool) -> pa.Array:
        """The keys at `positions` as the files' key ranges compare them: the integer key
        column's numbers when the ranges are numbers (no text parsed back into numbers, and
        no text taken for keys a load's new ranges leave out), else the record keys' text."""
        col = self.key_col
        if numbers and col is not None and col in batch.rows.column_names:
            values = batch.rows.column(col)
            if pa.types.is_integer(values.type):
                whole = len(positions) == len(values)
                return (values if whole else values.take(pa.array(positions))).combine_chunks()
        return batch.keys.take(pa.array(positions))

    def candidates(self, batch: Batch) -> list[tuple[int, np.ndarray]]:
        """(file index, batch positions) pairs: the files the index says may hold those
        records (none read)."""
        index_of = {f.path: k for k, f in enumerate(self.files)}
        out: list[tuple[int, np.ndarray]] = []
        ranges = self._ranges()
        for fidx, positions in self._scopes(batch):
            if not fidx or not len(positions):
                continue
            files = [self.files[k] for k in fidx]
            if ranges is not None:
                # Keys beyond every file's range (a load of new, time-ordered keys) are in no
                # file: dropped here as arrays, before any index sees them one by one.
                numbers = ranges.integer_key is not None
                inside = ranges.in_some_range(files, self._range_keys(batch, positions, numbers))
                if not inside.all():
                    positions = positions[inside]
                if not len(positions):
                    continue
            scope_keys = batch.keys.take(pa.array(positions))
            for path, hits in self.index.candidates(files, scope_keys.to_pylist()).items():
                out.append((index_of[path], positions[np.asarray(hits, dtype=np.int64)]))
        return out

    def _stored_matches(self, f: DataFile, columns: list[str], keys: pa.Array) -> pa.Table | None:
        """`key`, `row` (and `stored`) of copy-on-write file `f`'s rows whose key is among
        `keys`, read in ranges when the file is big (keyed/write/key_chunks.py)."""
        m = self._matches(f, columns, keys)
        with self._count_lock:
            self.row_groups_read += m.row_groups_read
            self.row_groups_skipped += m.row_groups_skipped
        if m.data is None:
            return None
        data = conform(m.data, self.schema, columns) if self.schema is not None else m.data
        got = {"key": data.column(RECORD_KEY_COL), "row": pa.array(m.rows, pa.int64())}
        if len(columns) > 1:
            got["stored"] = data.column(columns[1])
        return pa.table(got)

    def _matches(self, f: DataFile, columns: list[str], keys: pa.Array) -> Matches:
        """`matching_rows` of `f`; a small file fetched whole that holds one of `keys` is
        offered to `located` for its rewrite."""
        if ranged(f) or self.located.budget <= 0:
            return matching_rows(self.table.store, f, columns, keys)
        body = read_verified(self.table.store, f)
        m = whole_matches(pq.ParquetFile(pa.BufferReader(body)), columns, keys)
        if m.data is not None:
            self.located.offer(f, body)
        return m

    def _slice_matches(
        self, f: DataFile, columns: list[str], keys: pa.Array, parallelism: int
    ) -> pa.Table | None:
        """As `_stored_matches`, for a merge-on-read slice (base merged with its logs)."""
        data = self.rows_of(f, columns, parallelism=parallelism)
        if data.num_rows == 0:
            return None
        stored = data.column(RECORD_KEY_COL)
        rows = pc.indices_nonzero(pc.is_in(stored, value_set=keys))
        if not len(rows):
            return None
        got = {"key": stored.take(rows), "row": pc.cast(rows, pa.int64())}
        if len(columns) > 1:
            got["stored"] = data.column(columns[1]).take(rows)
        return pa.table(got)

    def locate(self, batch: Batch, probes: list[tuple[int, np.ndarray]] | None = None) -> pa.Table:
        """The batch's records the table holds: a table of `pos` (batch row), `file` (index
        into `self.files`), `row` (in `rows_of` that file) and `stored` (ordering value).
        Candidate files are read for their key (and ordering) column only, a bounded number
        at a time: memory holds the hits. `probes`: the batch's `candidates`, when the
        caller already asked the index (asking again would probe every filter again)."""
        order_col = self.props.ordering_field
        columns = [RECORD_KEY_COL]
        if order_col and self.schema is not None and order_col in self.schema.names:
            columns.append(order_col)
        if probes is None:
            probes = self.candidates(batch)
        if self.slices is not None:  # each log object these slices share: one GET
            groups = {self.files[k].group for k, _ in probes}
            wanted = [lf for g in groups for _, lf in self.slices[g].logs]
            self.log_cache = LogCache(self.table.store, wanted)

        alone = 1 if len(probes) > 1 else READ_PARALLELISM  # the pool below, or its own

        def match(probe: tuple[int, np.ndarray]) -> pa.Table | None:
            k, probe_pos = probe
            keys = batch.keys.take(pa.array(probe_pos))
            if self.slices is None:
                got = self._stored_matches(self.files[k], columns, keys)
            else:
                got = self._slice_matches(self.files[k], columns, keys, alone)
            if got is None:
                return None
            got = got.append_column("file", pa.array(np.full(got.num_rows, k, dtype=np.int64)))
            wanted = pa.table({"key": keys, "pos": probe_pos})
            return got.join(wanted, "key", join_type="inner").sort_by("row")

        self.files_read += len(probes)
        if len(probes) <= 1:
            found = [match(p) for p in probes]
        else:  # object-store latency overlaps, within the bytes-in-flight budget (each read
            # holds its file's bytes or, read in ranges, a piece of them); results stay in
            # candidate order
            found = bounded_map(
                match,
                probes,
                workers=LOCATE_PARALLELISM,
                budget=min(LOCATE_INFLIGHT_BYTES, self.table.settings.write_inflight_bytes),
                cost=lambda p: held_bytes(self.files[p[0]]),
            )
        pieces = [t for t in found if t is not None]
        if not pieces:
            return _no_hits()
        hits = pa.concat_tables(pieces, promote_options="default")
        # A key held twice (two writers inserted it concurrently): the last file read wins.
        hits = hits.append_column("seq", pa.array(np.arange(hits.num_rows, dtype=np.int64)))
        last = hits.group_by("pos").aggregate([("seq", "max")]).column("seq_max")
        return hits.take(last).sort_by("pos")
