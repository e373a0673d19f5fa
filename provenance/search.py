"""Reading events: searches (index + row-group statistics), sequential reads by id."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.timeutil import datetime_to_ms

from . import index
from .catalog import EventFile, Snapshot, Sums, file_containing
from .layout import JournalRef
from .objects import FOOTER_READ, ParquetSource
from .query import Query, RowPositions, index_probe, query_mask
from .ranged import RangedObject
from .schema import SCHEMA

TIME_COL = SCHEMA.get_field_index("event_time")
SIZE_COL = SCHEMA.get_field_index("file_size")
ID_COL = 0


def _ms(v: Any) -> int:
    """Parquet statistics of a timestamp column come back as datetimes (naive = UTC)."""
    if isinstance(v, datetime):
        return datetime_to_ms(v)
    return int(v)


def _int(v: Any) -> int:
    return int(v)


def _overlaps(
    st: pq.Statistics | None, lo: int | None, hi: int | None, conv: Callable[[Any], int]
) -> bool:
    if st is None or not st.has_min_max:
        return True
    if lo is not None and conv(st.max) < lo:
        return False
    return not (hi is not None and conv(st.min) > hi)


def _id_slice(t: pa.Table, first: int, end: int) -> pa.Table:
    """Rows with ids in [first, end) of a table sorted by event id (binary search)."""
    ids = t.column("event_id")
    lo = bisect.bisect_left(ids, first, key=_as_py)
    hi = bisect.bisect_left(ids, end, lo, key=_as_py)
    return t.slice(lo, hi - lo)


def _as_py(v: pa.Scalar) -> Any:
    return v.as_py()


#: Up to this many matching rows are cut out of the searched tables as slices (no copy);
#: more are copied out by one filter.
SLICE_ROWS = 64


def matching_rows(t: pa.Table, mask: pa.Array) -> list[pa.Table]:
    """The rows of `t` where `mask` holds. A few are taken as zero-copy slices, one per run
    of adjacent rows: a table filter copies each of the ~30 columns, ~0.2 ms for 1,000 rows
    of one journal even when 5 match, against microseconds for the slices."""
    rows = pc.indices_nonzero(mask)
    if len(rows) > SLICE_ROWS:
        return [t.filter(mask)]
    out: list[pa.Table] = []
    start = end = -1
    for i in rows.to_pylist():
        if i != end:
            if end > start:
                out.append(t.slice(start, end - start))
            start = i
        end = i + 1
    if end > start:
        out.append(t.slice(start, end - start))
    return out


def newest_first(t: pa.Table, limit: int) -> pa.Table:
    """The first `limit` rows of `t` by event time then id, newest first (null times last).
    A handful of rows are ordered in Python and put together from slices (no copy); a sort
    with Arrow takes (copies) every column."""
    if t.num_rows > SLICE_ROWS:
        return t.sort_by([("event_time", "descending"), ("event_id", "descending")]).slice(0, limit)
    times = pc.cast(t.column("event_time"), pa.int64()).to_pylist()
    ids = t.column("event_id").to_pylist()
    order = sorted(
        range(t.num_rows),
        key=lambda i: (times[i] is not None, times[i] or 0, ids[i]),
        reverse=True,
    )[:limit]
    if order == list(range(len(order))):
        return t.slice(0, len(order))
    return pa.concat_tables([t.slice(i, 1) for i in order])


class _File:
    """A merged file as one search needs it: the footer and decoded row groups from the
    process's caches; the file object (a pyarrow ParquetFile over ranged reads, ~0.5 ms to
    build) only when something must be read."""

    def __init__(
        self, source: ParquetSource, key: str, size: int, sums: Sums, hint: int = FOOTER_READ
    ) -> None:
        self.key, self._source, self._size, self._sums, self._hint = key, source, size, sums, hint
        self._opened: tuple[pq.ParquetFile, RangedObject | None] | None = None

    def _open(self) -> tuple[pq.ParquetFile, RangedObject | None]:
        if self._opened is None:
            self._opened = self._source.open(self.key, self._size, self._hint, self._sums)
        return self._opened

    def metadata(self) -> pq.FileMetaData:
        md = self._source.footer(self.key)
        return md if md is not None else self._open()[0].metadata

    def row_groups(self, rgs: list[int], columns: tuple[str, ...] = ()) -> pa.Table:
        cache = self._source.row_groups
        if len(rgs) == 1 and (hit := cache.cached(self.key, rgs[0], columns)) is not None:
            return hit
        pf, ranged = self._open()
        return cache.read(self.key, pf, ranged, rgs, columns)


@dataclass
class SearchStats:
    files: int = 0
    files_skipped: int = 0
    row_groups_read: int = 0
    index_row_groups_read: int = 0


class EventReader:
    def __init__(
        self,
        source: ParquetSource,
        load_journal: Callable[[JournalRef], pa.Table],
        indexed: Sequence[str],
        threads: int,
        row_group_events: int = 4096,
        select_journals: Callable[[Sequence[JournalRef], Query], Sequence[JournalRef]]
        | None = None,
    ) -> None:
        self._source = source
        self._select = select_journals or (lambda journals, q: journals)
        self._load_journal = load_journal
        self._indexed = set(indexed)
        self._row_group_events = row_group_events
        self._pool = ThreadPoolExecutor(
            max(1, threads), thread_name_prefix="flowledger-provenance-read"
        )
        self._lock = threading.Lock()
        self.last_stats = SearchStats()
        self._bounds: dict[str, index.TermBounds] = {}
        self._ids: dict[str, tuple[list[int], list[int]] | None] = {}
        self._positions = RowPositions()

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    # -- search -------------------------------------------------------------------------------
    def _file_matches(self, f: EventFile, q: Query, st: SearchStats) -> list[pa.Table] | None:
        if q.start_time is not None and f.max_time < q.start_time:
            return None
        if q.end_time is not None and f.min_time > q.end_time:
            return None
        if q.min_file_size is not None and f.max_size < q.min_file_size:
            return None
        if q.max_file_size is not None and f.min_size > q.max_file_size:
            return None
        candidates: set[int] | None = None
        probes = [t for t in q.terms if not t.inverted and (t.field in self._indexed)]
        if probes and f.index_key is not None:
            # The index first: a file without the term is skipped without reading its footer.
            ifile = _File(self._source, f.index_key, f.index_size, f.index_sums)
            for term in probes:
                lo, hi, filt = index_probe(term)
                rgs = self._index_lookup(ifile, lo, hi, filt, st)
                candidates = rgs if candidates is None else candidates & rgs
                if not candidates:
                    return None
        data = _File(self._source, f.events_key, f.events_size, f.events_sums, self._footer_hint(f))
        md = data.metadata()
        if candidates is None:
            candidates = set(range(md.num_row_groups))
        ranged_query = (q.start_time, q.end_time, q.min_file_size, q.max_file_size) != (None,) * 4
        keep = [] if ranged_query else sorted(candidates)
        for i in sorted(candidates) if ranged_query else ():
            rg = md.row_group(i)
            if not _overlaps(rg.column(TIME_COL).statistics, q.start_time, q.end_time, _ms):
                continue
            if not _overlaps(
                rg.column(SIZE_COL).statistics, q.min_file_size, q.max_file_size, _int
            ):
                continue
            keep.append(i)
        if not keep:
            return None
        t = data.row_groups(keep)
        with self._lock:
            st.row_groups_read += len(keep)
        return matching_rows(t, query_mask(t, q, self._positions))

    def _index_lookup(
        self, ifile: _File, lo: str, hi: str, pattern: str | None, st: SearchStats
    ) -> set[int]:
        bounds = self._bounds.get(ifile.key)
        if bounds is None:
            bounds = self._bounds[ifile.key] = index.row_group_bounds(ifile.metadata())
        wanted = index.candidate_row_groups(bounds, lo, hi)
        with self._lock:
            st.index_row_groups_read += len(wanted)
        if not wanted:
            return set()
        terms = ifile.row_groups(wanted, ("term", "rg"))
        return index.matching_row_groups(terms, lo, hi, pattern)

    def _footer_hint(self, f: EventFile) -> int:
        # About 3 KB of footer per row group (32 leaf columns); one GET fetches it all.
        return (f.rows // self._row_group_events + 2) * 4096

    def _warm_footer(self, f: EventFile) -> None:
        self._source.open(f.events_key, f.events_size, self._footer_hint(f), f.events_sums)

    def search(self, snap: Snapshot, q: Query) -> pa.Table:
        st = SearchStats(files=len(snap.files))
        # Cold reader: fetch data footers while the index is probed, not after.
        cold = [f for f in snap.files if not self._source.has_footer(f.events_key)]
        warming = [self._pool.submit(self._warm_footer, f) for f in cold]
        if len(snap.files) == 1:  # nothing to overlap: no hop to the pool and back
            parts = [self._file_matches(snap.files[0], q, st)]
        else:
            parts = list(self._pool.map(lambda f: self._file_matches(f, q, st), snap.files))
        for fut in warming:
            fut.result()
        st.files_skipped = sum(1 for p in parts if p is None)
        found = [t for p in parts if p is not None for t in p]
        # The selected journals as one table (chunks, no copy): one mask for all of them.
        journals = [self._load_journal(j) for j in self._select(snap.journals, q)]
        if journals:
            t = journals[0] if len(journals) == 1 else pa.concat_tables(journals)
            found += matching_rows(t, query_mask(t, q, self._positions))
        self.last_stats = st
        found = [t for t in found if t.num_rows]
        if not found:
            return SCHEMA.empty_table()
        return newest_first(pa.concat_tables(found), q.max_results)

    # -- by id ----------------------------------------------------------------------------------
    def _id_bounds(self, key: str, md: pq.FileMetaData) -> tuple[list[int], list[int]] | None:
        """(min ids, max ids) of the row groups, read from the footer once per file; None
        where a row group has no statistics."""
        if key in self._ids:
            return self._ids[key]
        mins: list[int] = []
        maxs: list[int] = []
        found: tuple[list[int], list[int]] | None = (mins, maxs)
        for i in range(md.num_row_groups):
            st = md.row_group(i).column(ID_COL).statistics
            if st is None or not st.has_min_max:
                found = None
                break
            mins.append(int(st.min))
            maxs.append(int(st.max))
        self._ids[key] = found
        return found

    def _id_row_groups(self, key: str, md: pq.FileMetaData, first: int, end: int) -> list[int]:
        """Row groups holding ids in [first, end): a binary search over the row groups'
        id ranges (the file is sorted by event id), all of them where statistics lack."""
        bounds = self._id_bounds(key, md)
        if bounds is None:
            return list(range(md.num_row_groups))
        mins, maxs = bounds
        i = max(0, bisect.bisect_right(mins, first) - 1)
        out = []
        while i < len(mins) and mins[i] < end:
            if maxs[i] >= first:
                out.append(i)
            i += 1
        return out

    def cached_event(self, snap: Snapshot, event_id: int) -> pa.Table | None:
        """The event, if memory alone answers (footer and decoded row group cached): no I/O.
        None when it would need a read, or is not in a merged file of `snap`."""
        f = file_containing(snap.files, event_id)
        md = None if f is None else self._source.footer(f.events_key)
        if f is None or md is None:
            return None
        keep = self._id_row_groups(f.events_key, md, event_id, event_id + 1)
        hit = self._source.row_groups.cached(f.events_key, keep[0]) if len(keep) == 1 else None
        t = None if hit is None else _id_slice(hit, event_id, event_id + 1)
        return t if t is not None and t.num_rows else None

    def _read_ids(self, f: EventFile, first: int, end: int) -> pa.Table:
        pf, ranged = self._source.open(f.events_key, f.events_size, sums=f.events_sums)
        keep = self._id_row_groups(f.events_key, pf.metadata, first, end)
        if not keep:
            return SCHEMA.empty_table()
        if end - first == 1 and len(keep) == 1:
            # One event (NiFi's getEvent): from the decoded row group, cached per process,
            # sliced by a binary search on its sorted ids; ~0.1 ms instead of decoding
            # 4,096 events of 30 columns per lookup.
            t = self._source.row_groups.read(f.events_key, pf, ranged, keep)
            return _id_slice(t, first, end)
        self._source.prefetch_row_groups(f.events_key, pf.metadata, ranged, keep)
        t = pf.read_row_groups(keep)
        ids = t.column("event_id")
        return t.filter(pc.and_(pc.greater_equal(ids, first), pc.less(ids, end)))

    def get_events(self, snap: Snapshot, first_id: int, max_events: int) -> pa.Table:
        """Up to `max_events` events with id >= first_id, in id order (NiFi's getEvents)."""
        parts: list[pa.Table] = []
        need = max_events
        for f in snap.files:
            if need <= 0:
                break
            if f.end_id <= first_id:
                continue
            t = self._read_ids(f, max(first_id, f.first_id), max(first_id, f.first_id) + need)
            parts.append(t)
            need -= t.num_rows
        for j in snap.journals:
            if need <= 0:
                break
            if j.end_id <= first_id:
                continue
            t = self._load_journal(j)
            t = t.filter(pc.greater_equal(t.column("event_id"), first_id)).slice(0, need)
            parts.append(t)
            need -= t.num_rows
        if not parts:
            return SCHEMA.empty_table()
        return pa.concat_tables(parts).sort_by("event_id").slice(0, max_events)

    def get_event(self, snap: Snapshot, event_id: int) -> pa.Table:
        hot = self.cached_event(snap, event_id)  # no file object built when in memory
        if hot is not None:
            return hot
        f = file_containing(snap.files, event_id)
        if f is not None:
            return self._read_ids(f, event_id, event_id + 1)
        for j in snap.journals:
            if j.first_id <= event_id < j.end_id:
                t = self._load_journal(j)
                return t.filter(pc.equal(t.column("event_id"), event_id))
        return SCHEMA.empty_table()
