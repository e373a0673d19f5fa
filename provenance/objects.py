"""Reading immutable objects: ranged reads with a block cache, cached Parquet footers, and a
local file cache for DuckDB. Merged files and journals are written once and never change,
so nothing cached can go stale (an expired file is simply no longer referenced)."""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from cachetools import LRUCache

from storage import IntegrityError, ObjectStore, verify
from storage.checksum import format_checksum
from timeline import row_group_spans

from .catalog import NO_SUMS, Sums
from .ranged import BlockCache, RangedObject, footer_of

FOOTER_READ = 64 * 1024
MAX_FOOTERS = 512

#: Row-group byte spans of a file from its (cached) footer.
SpansOf = Callable[[str, pq.FileMetaData], list[tuple[int, int]]]


class _Footers(LRUCache[str, pq.FileMetaData]):
    """Parsed footers, the least recently used dropped first, with what was derived from them
    (row-group spans, verification units)."""

    def __init__(
        self,
        maxsize: int,
        spans: dict[str, list[tuple[int, int]]],
        units: dict[str, list[tuple[int, int, str]]],
    ) -> None:
        super().__init__(maxsize)
        self.spans, self.units = spans, units

    def popitem(self) -> tuple[str, pq.FileMetaData]:
        key, md = super().popitem()
        self.spans.pop(key, None)
        self.units.pop(key, None)
        return key, md


class RowGroupCache:
    """Decoded row groups of immutable files (a repeated lookup skips GET and decode).

    Concurrent readers of the same missing row group decode it once (the others wait for
    it): under 50 concurrent lookups the decode, not the GET, is what costs CPU."""

    def __init__(self, spans: SpansOf, capacity: int = 256) -> None:
        self._spans = spans
        self._lock = threading.Lock()
        self._tables: LRUCache[tuple[str, int, tuple[str, ...]], pa.Table] = LRUCache(capacity)
        self._loading: dict[tuple[str, int, tuple[str, ...]], threading.Lock] = {}

    def cached(self, key: str, rg: int, columns: tuple[str, ...] = ()) -> pa.Table | None:
        """A decoded row group if cached (no footer, no file object needed)."""
        return self._get((key, rg, columns))

    def _get(self, k: tuple[str, int, tuple[str, ...]]) -> pa.Table | None:
        with self._lock:
            return self._tables.get(k)  # a hit becomes the most recently used

    def read(
        self,
        key: str,
        pf: pq.ParquetFile,
        ranged: RangedObject | None,
        rgs: list[int],
        columns: tuple[str, ...] = (),
    ) -> pa.Table:
        parts: dict[int, pa.Table] = {}
        for i in rgs:
            t = self._get((key, i, columns))
            if t is not None:
                parts[i] = t
        missing = sorted(i for i in rgs if i not in parts)  # one lock order: no deadlock
        if missing:
            waited = list(missing)
            with self._lock:
                locks = [
                    self._loading.setdefault((key, i, columns), threading.Lock()) for i in waited
                ]
            for lock in locks:
                lock.acquire()
            try:
                for i in list(missing):  # decoded by another reader while we waited
                    t = self._get((key, i, columns))
                    if t is not None:
                        parts[i] = t
                        missing.remove(i)
                if missing:
                    ParquetSource.prefetch_spans(ranged, self._spans(key, pf.metadata), missing)
                    for i in missing:
                        # One thread: a row group is ~30 small column chunks; fanning them out
                        # to Arrow's pool cost more CPU (~14 %) than it saved, and lookups of
                        # several files already decode in parallel.
                        parts[i] = pf.read_row_group(
                            i, columns=list(columns) or None, use_threads=False
                        )
                    with self._lock:
                        for i in missing:  # past capacity: the least recently used go
                            self._tables[(key, i, columns)] = parts[i]
            finally:
                with self._lock:
                    for i in waited:
                        self._loading.pop((key, i, columns), None)
                for lock in locks:
                    lock.release()
        if len(rgs) == 1:
            return parts[rgs[0]]
        return pa.concat_tables([parts[i] for i in rgs])


class ParquetSource:
    """Opens merged files for reading: from the local cache if present, else by ranged GETs,
    with footers parsed once per process."""

    def __init__(self, store: ObjectStore, cache_root: Path) -> None:
        self._store = store
        self._cache = cache_root
        self.blocks = BlockCache()
        self.row_groups = RowGroupCache(self.spans)
        #: Row-group byte spans of the files whose footer is cached (checked by `sums`).
        self._spans: dict[str, list[tuple[int, int]]] = {}
        #: Their verification units (span, checksum), sorted: built once, not per open.
        self._units: dict[str, list[tuple[int, int, str]]] = {}
        self._footers = _Footers(MAX_FOOTERS, self._spans, self._units)
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self._kept: frozenset[str] | None = None  # `keep` of the last `prune`

    def local_path(self, key: str) -> Path:
        return self._cache / key

    def cached(self, key: str) -> Path | None:
        p = self.local_path(key)
        return p if p.exists() else None

    def download(self, key: str, sums: Sums = NO_SUMS, size: int = -1) -> Path:
        """The object as a local file (downloaded once; immutable, so always consistent).
        The copy is verified against the recorded checksum (and size) before it is renamed
        into place, so the cache holds only good copies."""
        path = self.local_path(key)
        if path.exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        crc, total = 0, 0
        try:
            with self._store.open_read(key) as src, open(tmp, "wb") as dst:
                while block := src.read(1024 * 1024):
                    crc, total = zlib.crc32(block, crc), total + len(block)
                    dst.write(block)
            where = self._store.url(key)
            if size >= 0 and total != size:
                raise IntegrityError(
                    f"{where} is corrupt: {total} bytes read, the commit recorded {size}", where
                )
            if sums.whole and format_checksum(crc) != sums.whole:
                raise IntegrityError(
                    f"{where} is corrupt: checksum {format_checksum(crc)} != recorded "
                    f"{sums.whole}; the object was damaged or truncated",
                    where,
                )
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def footer(self, key: str) -> pq.FileMetaData | None:
        """The parsed (verified) footer of `key` if cached."""
        with self._lock:
            return self._footers.get(key)

    def has_footer(self, key: str) -> bool:
        return key in self._footers or self.cached(key) is not None

    def open(
        self, key: str, size: int, footer_hint: int = FOOTER_READ, sums: Sums = NO_SUMS
    ) -> tuple[pq.ParquetFile, RangedObject | None]:
        """`footer_hint`: bytes of the tail to fetch at once (one GET for the whole footer
        when the caller can estimate its size)."""
        if key not in self._footers:
            with self._lock:
                loading = self._loading.setdefault(key, threading.Lock())
            with loading:  # one footer fetch per key, even from concurrent readers
                return self._open(key, size, footer_hint, sums)
        return self._open(key, size, footer_hint, sums)

    def _open(
        self, key: str, size: int, footer_hint: int, sums: Sums
    ) -> tuple[pq.ParquetFile, RangedObject | None]:
        local = self.cached(key)
        with self._lock:
            md = self._footers.get(key)  # a hit becomes the most recently used
        fresh = md is None
        if local is not None:
            pf = pq.ParquetFile(str(local), metadata=md)
            ranged = None
        else:
            ranged = RangedObject(self._store, key, size, self.blocks, sums)
            tail_data = b""
            if md is None:
                tail = min(size, max(FOOTER_READ, footer_hint))
                if sums.footer:  # one GET of the tail; the footer is checked before parsing
                    data = tail_data = ranged.get(size - tail, tail)
                    start, _ = footer_of(ranged, size, data)
                    if start >= size - tail:
                        piece = data[start - (size - tail) :]
                        verify(piece, sums.footer, f"{ranged.where} footer")
                        self.blocks.add(key, start, piece)
                    md = ranged.verified_metadata()  # a cache hit, or a GET of a big footer
                else:
                    ranged.prefetch(max(0, size - tail), tail)
            pf = pq.ParquetFile(ranged, metadata=md)
            if sums.row_groups:
                units = self._units.get(key)
                if units is None:
                    units = self._units[key] = ranged.row_group_units(self.spans(key, pf.metadata))
                ranged.set_units(units)
                if tail_data:  # row groups that came with the footer: no GET later
                    ranged.absorb(size - len(tail_data), tail_data)
        with self._lock:
            if fresh:
                self._footers[key] = pf.metadata  # past MAX_FOOTERS: the least recently used go
                self._loading.pop(key, None)
        return pf, ranged

    def spans(self, key: str, md: pq.FileMetaData) -> list[tuple[int, int]]:
        """Row-group byte spans of `key`, computed once per footer (a walk over every
        column chunk: ~15,000 for a 490-row-group file, too slow to repeat per lookup)."""
        spans = self._spans.get(key)
        if spans is None:
            spans = self._spans[key] = row_group_spans(md)
        return spans

    def prune(self, keep: set[str]) -> int:
        """Delete local copies of merged files that neither this snapshot (`keep`) nor the
        one pruned for before references (expired). The one before stays a round longer: a
        SQL connection made on it opens its files when its query runs, and may not have yet
        (a file already open stays readable after unlink). Same `keep` as last time: no walk."""
        with self._lock:
            last, self._kept = self._kept, frozenset(keep)
        if last == self._kept:
            return 0
        spare = set(keep) | (last or set())
        removed = 0
        data = self._cache / "table"
        if not data.exists():
            return 0
        for path in data.rglob("*.parquet"):
            key = path.relative_to(self._cache).as_posix()
            if key not in spare:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def prefetch_row_groups(
        self, key: str, pf: pq.FileMetaData, ranged: RangedObject | None, rgs: list[int]
    ) -> None:
        """One GET per run of adjacent row groups instead of one per column chunk."""
        self.prefetch_spans(ranged, self.spans(key, pf), rgs)

    @staticmethod
    def prefetch_spans(
        ranged: RangedObject | None, every: list[tuple[int, int]], rgs: list[int]
    ) -> None:
        if ranged is None or not rgs:
            return
        spans = [every[i] for i in sorted(rgs)]
        merged: list[list[int]] = []
        for s, e in spans:
            if merged and s <= merged[-1][1] + 64 * 1024:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        for s, e in merged:
            ranged.prefetch(s, e - s)


def cache_root(cache_dir: str, store: ObjectStore) -> Path:
    digest = hashlib.sha256(store.uri.encode()).hexdigest()[:16]
    return Path(cache_dir) / digest
