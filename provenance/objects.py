"""Reading immutable objects: ranged reads with a block cache, cached Parquet footers, and a
local file cache for DuckDB. Merged files and journals are written once and never change,
so nothing cached can go stale (an expired file is simply no longer referenced)."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import uuid
from collections import OrderedDict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from storage import ObjectStore

FOOTER_READ = 64 * 1024
MAX_FOOTERS = 512


class BlockCache:
    """Byte ranges of immutable objects, least recently used evicted past `capacity`."""

    def __init__(self, capacity: int = 256 * 1024 * 1024) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._lru: OrderedDict[tuple[str, int], int] = OrderedDict()  # (key, start) -> size
        self._by_key: dict[str, dict[int, bytes]] = {}
        self._size = 0

    def find(self, key: str, start: int, length: int) -> bytes | None:
        with self._lock:
            for s, data in self._by_key.get(key, {}).items():
                if s <= start and start + length <= s + len(data):
                    self._lru.move_to_end((key, s))
                    return data[start - s : start - s + length]
        return None

    def add(self, key: str, start: int, data: bytes) -> None:
        with self._lock:
            blocks = self._by_key.setdefault(key, {})
            if start in blocks:
                return
            blocks[start] = data
            self._lru[(key, start)] = len(data)
            self._size += len(data)
            while self._size > self._capacity and self._lru:
                (k, s), size = self._lru.popitem(last=False)
                del self._by_key[k][s]
                if not self._by_key[k]:
                    del self._by_key[k]
                self._size -= size


class RowGroupCache:
    """Decoded row groups of immutable files (a repeated lookup skips GET and decode)."""

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._tables: OrderedDict[tuple[str, int, tuple[str, ...]], pa.Table] = OrderedDict()

    def read(
        self,
        key: str,
        pf: pq.ParquetFile,
        ranged: RangedObject | None,
        rgs: list[int],
        columns: tuple[str, ...] = (),
    ) -> pa.Table:
        parts: dict[int, pa.Table] = {}
        with self._lock:
            for i in rgs:
                t = self._tables.get((key, i, columns))
                if t is not None:
                    self._tables.move_to_end((key, i, columns))
                    parts[i] = t
        missing = [i for i in rgs if i not in parts]
        if missing:
            ParquetSource.prefetch_row_groups(pf, ranged, missing)
            for i in missing:
                parts[i] = pf.read_row_group(i, columns=list(columns) or None)
            with self._lock:
                for i in missing:
                    self._tables[(key, i, columns)] = parts[i]
                while len(self._tables) > self._capacity:
                    self._tables.popitem(last=False)
        return pa.concat_tables([parts[i] for i in rgs])


class RangedObject(io.RawIOBase):
    """A seekable file over an object: every read is served from the block cache or one GET."""

    def __init__(self, store: ObjectStore, key: str, size: int, blocks: BlockCache) -> None:
        self._store, self._key, self._size, self._blocks = store, key, size, blocks
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def prefetch(self, start: int, length: int) -> None:
        length = min(length, self._size - start)
        if length > 0 and self._blocks.find(self._key, start, length) is None:
            self._blocks.add(self._key, start, self._store.get(self._key, start, length))

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(b), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._blocks.find(self._key, self._pos, n)
        if data is None:
            data = self._store.get(self._key, self._pos, n)
            self._blocks.add(self._key, self._pos, data)
        b[:n] = data
        self._pos += n
        return n


class ParquetSource:
    """Opens merged files for reading: from the local cache if present, else by ranged GETs,
    with footers parsed once per process."""

    def __init__(self, store: ObjectStore, cache_root: Path) -> None:
        self._store = store
        self._cache = cache_root
        self.blocks = BlockCache()
        self.row_groups = RowGroupCache()
        self._footers: OrderedDict[str, pq.FileMetaData] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def local_path(self, key: str) -> Path:
        return self._cache / key

    def cached(self, key: str) -> Path | None:
        p = self.local_path(key)
        return p if p.exists() else None

    def download(self, key: str) -> Path:
        """The object as a local file (downloaded once; immutable, so always consistent)."""
        path = self.local_path(key)
        if path.exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with self._store.open_read(key) as src, open(tmp, "wb") as dst:
            while block := src.read(1024 * 1024):
                dst.write(block)
        os.replace(tmp, path)
        return path

    def has_footer(self, key: str) -> bool:
        return key in self._footers or self.cached(key) is not None

    def open(
        self, key: str, size: int, footer_hint: int = FOOTER_READ
    ) -> tuple[pq.ParquetFile, RangedObject | None]:
        """`footer_hint`: bytes of the tail to fetch at once (one GET for the whole footer
        when the caller can estimate its size)."""
        if key not in self._footers:
            with self._lock:
                loading = self._loading.setdefault(key, threading.Lock())
            with loading:  # one footer fetch per key, even from concurrent readers
                return self._open(key, size, footer_hint)
        return self._open(key, size, footer_hint)

    def _open(
        self, key: str, size: int, footer_hint: int
    ) -> tuple[pq.ParquetFile, RangedObject | None]:
        local = self.cached(key)
        md = self._footers.get(key)
        if local is not None:
            pf = pq.ParquetFile(str(local), metadata=md)
            ranged = None
        else:
            ranged = RangedObject(self._store, key, size, self.blocks)
            if md is None:
                tail = max(FOOTER_READ, footer_hint)
                ranged.prefetch(max(0, size - tail), tail)
            pf = pq.ParquetFile(ranged, metadata=md)
        with self._lock:
            if md is None:
                self._footers[key] = pf.metadata
                self._loading.pop(key, None)
                while len(self._footers) > MAX_FOOTERS:
                    self._footers.popitem(last=False)
            else:
                self._footers.move_to_end(key)
        return pf, ranged

    def prune(self, keep: set[str]) -> int:
        """Delete local copies of merged files no longer referenced (expired). Safe while
        another reader has one open: an unlinked file stays readable until closed."""
        removed = 0
        data = self._cache / "table"
        if not data.exists():
            return 0
        for path in data.rglob("*.parquet"):
            key = path.relative_to(self._cache).as_posix()
            if key not in keep:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    @staticmethod
    def prefetch_row_groups(
        pf: pq.ParquetFile, ranged: RangedObject | None, rgs: list[int]
    ) -> None:
        """One GET per run of adjacent row groups instead of one per column chunk."""
        if ranged is None or not rgs:
            return
        md = pf.metadata
        spans = []
        for i in sorted(rgs):
            rg = md.row_group(i)
            starts, ends = [], []
            for c in range(rg.num_columns):
                col = rg.column(c)
                start = col.data_page_offset
                if col.has_dictionary_page and col.dictionary_page_offset is not None:
                    start = min(start, col.dictionary_page_offset)
                starts.append(start)
                ends.append(start + col.total_compressed_size)
            spans.append((min(starts), max(ends)))
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
