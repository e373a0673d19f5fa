"""Finding the file groups that may hold a key, without reading base files.

`KeyIndex` is the seam: the copy-on-write writer asks it which of the snapshot's files may
hold each incoming key and reads only those. `RangeBloomIndex` answers from what every keyed
commit records per file (key range and bloom filter, inside the checksummed commit
metadata); a record-level index built by the `indexing` action would answer exactly with the
same interface.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import (
    IntegrityError,
    NotFound,
    ObjectStore,
    checksum_of,
    open_blob,
    seal_blob,
    verify,
)

from ...file_groups.log_files import LOG_FILES, log_ref
from ...file_groups.sidecars import WRITE_STATS
from ...metadata import DataFile
from ...snapshot import TableState
from ..keys import RECORD_KEY_COL
from ..properties import KeyedProperties
from .bloom import HASH_BLAKE2B, INLINE_MAX_BYTES, BloomFilter, Keys, key_hashes

log = logging.getLogger(__name__)

#: Appended to a log's ref: the index entry of the keys it upserts that its slice's base
#: file's range and bloom do not name (keyed/index/merge_on_read.py).
BEYOND_BASE = "#beyond_base"
#: Bloom sidecar objects one index lookup fetches at once (GETs in flight); a lookup holds
#: the filters of at most this many files beyond its cache (below) at a time.
SIDECAR_PARALLELISM = 16
#: Bytes of sidecar filters an index keeps once probed (for an index asked more than once
#: in one write). Past it a filter is dropped after its probe and fetched again if asked
#: again: a table's filters add up to ~3.6 bytes per key (fpp 1e-6), so holding all of them
#: would grow a writer's memory with the table.
SIDECAR_CACHE_BYTES = 32 * 1024 * 1024


class KeyIndex(Protocol):
    def candidates(self, files: Sequence[DataFile], keys: Sequence[str]) -> dict[str, list[int]]:
        """file path -> positions in `keys` of the keys that may be stored in that file
        (files with none are left out). False positives cost a read, never correctness."""
        ...


def write_stats_by_path(st: TableState) -> dict[str, Mapping[str, Any]]:
    """Every live file's write stats (recorded by keyed commits), and every log file's key
    range and bloom filter, by path."""
    out: dict[str, Mapping[str, Any]] = {}
    for e in st.ordered_writes():
        for s in e.metadata.get(WRITE_STATS, ()):
            out[str(s["path"])] = s
        for lg in e.metadata.get(LOG_FILES, ()):  # a log's keys (merge-on-read tables)
            if "min_key" in lg:
                out[log_ref(lg)] = lg
            if lg.get("beyond_base"):  # its keys its base's range and bloom do not name
                out[log_ref(lg) + BEYOND_BASE] = lg["beyond_base"]
    return out


def bloom_ref(
    store: ObjectStore,
    data_path: str,
    keys: Keys,
    fpp: float,
    *,
    superset: BloomFilter | None = None,
) -> dict[str, Any]:
    """The write-stats fields of a file's bloom filter: inline when small, else a sidecar
    object (`<data file>.bloom`, under the instant's data prefix so rollback removes it;
    the cleaner removes it with its data file). `superset`: a filter already holding every
    one of `keys` (the filter of the file a delete rewrote: its keys are a subset), taken
    as it is instead of hashing the keys again; it answers no key it did not answer before,
    so it never misses one."""
    if not len(keys):
        return {"bloom": None}
    bf = superset if superset is not None else BloomFilter.build(keys, fpp)
    return filter_ref(store, data_path, bf)


def filter_ref(store: ObjectStore, data_path: str, bf: BloomFilter) -> dict[str, Any]:
    """The write-stats fields of a file's bloom filter `bf`, already built (as `bloom_ref`
    stores it: inline when small, else a sidecar)."""
    if len(bf.bits) <= INLINE_MAX_BYTES:
        return {"bloom": bf.to_json()}
    path = data_path.rsplit(".", 1)[0] + ".bloom"
    body = seal_blob(bf.bits)
    store.put(path, body)
    return {
        "bloom": None,
        "bloom_path": path,
        "bloom_checksum": checksum_of(body),
        "bloom_num_bits": bf.num_bits,
        "bloom_num_hashes": bf.num_hashes,
        "bloom_hash": bf.hash_name,
    }


def _key_arrow(keys: Keys) -> pa.Array:
    """Record keys as one Arrow string array."""
    if isinstance(keys, pa.ChunkedArray):
        return keys.combine_chunks()
    if isinstance(keys, pa.Array):
        return keys
    return pa.array(list(keys), pa.string())


class RangeBloomIndex:
    """Key ranges prune first (a bisect per file over the sorted keys), bloom filters second
    (inline, or one GET of a checksummed sidecar for a file whose range matched)."""

    def __init__(
        self,
        stats: Mapping[str, Mapping[str, Any]],
        store: ObjectStore,
        integer_key: str | None = None,
    ) -> None:
        """`integer_key`: the single integer key column, whose ranges are compared as
        numbers (its column stats); as text, 10 sorts before 9 and ranges overlap."""
        self.stats = stats
        self.store = store
        self.integer_key = integer_key
        self.probed_files = 0  # files whose range held some key (for benchmarks and tests)
        #: Filters fetched from sidecars, by data file, up to `SIDECAR_CACHE_BYTES`: a write
        #: that asks more than once GETs each once while they fit.
        self._sidecars: dict[str, BloomFilter] = {}
        self._cached_bytes = 0

    def candidates(self, files: Sequence[DataFile], keys: Sequence[str]) -> dict[str, list[int]]:
        if self.integer_key is not None:
            numbers = [int(k) for k in keys]
            order = sorted(range(len(keys)), key=numbers.__getitem__)
            ordered: list[Any] = [numbers[i] for i in order]
        else:
            order = sorted(range(len(keys)), key=keys.__getitem__)
            ordered = [keys[i] for i in order]
        out: dict[str, list[int]] = {}
        hashes: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # each key hashed once per hash
        probed: list[tuple[DataFile, int, int]] = []
        for f in files:
            lo, hi = self._range(f)
            if lo is None or hi is None:
                if f.rows == 0:
                    continue  # an empty slice holds nothing
                first, last = 0, len(ordered)
            else:
                first = bisect.bisect_left(ordered, lo)
                last = bisect.bisect_right(ordered, hi)
            if first < last:
                probed.append((f, first, last))
        # A window of files at a time: their sidecars are fetched together (latency
        # overlaps), the next window's while this one is probed, through one pool for the
        # whole lookup; each is dropped after its probe unless the cache keeps it.
        at = np.asarray(order, dtype=np.int64)  # one array: each file's span is a view of it
        windows = [
            probed[i : i + SIDECAR_PARALLELISM] for i in range(0, len(probed), SIDECAR_PARALLELISM)
        ]
        if not any(self._missing([f for f, _, _ in w]) for w in windows):
            for window in windows:
                self._probe(window, {}, at, keys, hashes, out)
            return out
        with ThreadPoolExecutor(SIDECAR_PARALLELISM, "flowledger-sidecar-read") as pool:
            ahead = self._fetch_sidecars(pool, [f for f, _, _ in windows[0]])
            for i, window in enumerate(windows):
                fetched = self._arrived(ahead)
                for path, bf in fetched.items():
                    self._keep(path, bf)
                if i + 1 < len(windows):
                    ahead = self._fetch_sidecars(pool, [f for f, _, _ in windows[i + 1]])
                self._probe(window, fetched, at, keys, hashes, out)
        return out

    def _probe(
        self,
        window: Sequence[tuple[DataFile, int, int]],
        fetched: Mapping[str, BloomFilter],
        order: np.ndarray,
        keys: Sequence[str],
        hashes: dict[str, tuple[np.ndarray, np.ndarray]],
        out: dict[str, list[int]],
    ) -> None:
        """Probe the files of `window` (file, first, last: its keys' span in `order`) with
        their bloom filters, adding each file's possible keys to `out`."""
        for f, first, last in window:
            self.probed_files += 1
            pos = order[first:last]
            bloom = self._bloom(f, fetched)
            if bloom is not None:
                h = hashes.get(bloom.hashed_with)
                if h is None:
                    h = hashes[bloom.hashed_with] = key_hashes(keys, bloom.hashed_with)
                pos = pos[bloom.might_contain_hashed(h[0][pos], h[1][pos])]
            if len(pos):
                out[f.path] = pos.tolist()

    def in_some_range(self, files: Sequence[DataFile], keys: Keys) -> np.ndarray:
        """Per key: whether some file's key range holds it (a file without a range holds
        anything). A key outside every range is in no file: no index needs to look it up.
        With an integer key, `keys` may be its numbers (compared as they are) or its text.

        Vectorized over the keys (a load batch has millions): the files' ranges are merged
        into disjoint intervals first (files written together share most of their range),
        then each key is placed among them."""
        arr = _key_arrow(keys)
        n = len(arr)
        spans: list[tuple[Any, Any]] = []
        for f in files:
            lo, hi = self._range(f)
            if lo is None or hi is None:
                if f.rows == 0:
                    continue  # an empty slice holds nothing
                return np.ones(n, dtype=bool)
            spans.append((lo, hi))
        if not spans or n == 0:
            return np.zeros(n, dtype=bool)
        spans.sort()
        merged = [list(spans[0])]
        for lo, hi in spans[1:]:
            if lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        if self.integer_key is not None:
            try:
                values = pc.cast(arr, pa.int64()).to_numpy(zero_copy_only=False)
                starts = np.array([m[0] for m in merged], dtype=np.int64)
                ends = np.array([m[1] for m in merged], dtype=np.int64)
            except (pa.ArrowInvalid, OverflowError):  # beyond int64: compare as Python ints
                values = np.array([int(k) for k in arr.to_pylist()], dtype=object)
                starts = np.array([m[0] for m in merged], dtype=object)
                ends = np.array([m[1] for m in merged], dtype=object)
            at = np.searchsorted(starts, values, "right") - 1
            inside: np.ndarray = at >= 0
            inside[inside] = values[inside] <= ends[at[inside]]
            return inside
        hit = pa.array(np.zeros(n, dtype=bool))
        for lo, hi in merged:  # text: Arrow comparisons, one pass per disjoint interval
            within = pc.and_(pc.greater_equal(arr, lo), pc.less_equal(arr, hi))
            hit = pc.or_(hit, within)
        return np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)

    def _missing(self, files: Sequence[DataFile]) -> list[tuple[str, Mapping[str, Any]]]:
        """The files among `files` whose filter is a sidecar not in the cache, with stats."""
        todo = []
        for f in files:
            s = self.stats.get(f.path, {})
            if f.path not in self._sidecars and not s.get("bloom") and s.get("bloom_path"):
                todo.append((f.path, s))
        return todo

    def _fetch_sidecars(
        self, pool: ThreadPoolExecutor, files: Sequence[DataFile]
    ) -> dict[str, Future[BloomFilter]]:
        """Start the GETs of the sidecar filters of `files` not cached, all at once (one
        round trip each: fetched one after the other they add up); the caller keeps them
        in the cache while it has room and drops the rest after its probe."""
        return {
            path: pool.submit(self._sidecar, s, str(s["bloom_path"]))
            for path, s in self._missing(files)
        }

    def _arrived(self, ahead: Mapping[str, Future[BloomFilter]]) -> dict[str, BloomFilter]:
        """The fetched filters; a sidecar missing or damaged is left out (its file is then a
        candidate for every key in its range: a filter is derived data, never a reason to
        refuse a write), with a warning naming it."""
        out = {}
        for path, fut in ahead.items():
            try:
                out[path] = fut.result()
            except (IntegrityError, NotFound) as exc:
                log.warning(
                    "bloom filter of %s unreadable (%s): its file is read instead", path, exc
                )
        return out

    def known_filter(self, f: DataFile) -> BloomFilter | None:
        """The bloom filter of `f` when it is at hand without a request (inline in its write
        stats, or a sidecar this index fetched and kept); None otherwise."""
        s = self.stats.get(f.path, {})
        if s.get("bloom"):
            return BloomFilter.from_json(s["bloom"])
        return self._sidecars.get(f.path)

    def _keep(self, path: str, bf: BloomFilter) -> None:
        if self._cached_bytes + len(bf.bits) <= SIDECAR_CACHE_BYTES:
            self._sidecars[path] = bf
            self._cached_bytes += len(bf.bits)

    def _bloom(self, f: DataFile, fetched: Mapping[str, BloomFilter]) -> BloomFilter | None:
        s = self.stats.get(f.path, {})
        if s.get("bloom"):
            return BloomFilter.from_json(s["bloom"])
        if not s.get("bloom_path"):
            return None
        return self._sidecars.get(f.path) or fetched.get(f.path)

    def _sidecar(self, s: Mapping[str, Any], path: str) -> BloomFilter:
        data = self.store.get(str(path))
        where = self.store.url(str(path))
        verify(data, str(s.get("bloom_checksum", "")), where)
        bits, _ = open_blob(data, where)
        return BloomFilter(
            bytes(bits),
            int(s["bloom_num_bits"]),
            int(s["bloom_num_hashes"]),
            str(s.get("bloom_hash", HASH_BLAKE2B)),
        )

    def _range(self, f: DataFile) -> tuple[Any, Any]:
        if self.integer_key is not None:
            cs = f.column_stats.get(self.integer_key)
            if cs and isinstance(cs.get("min"), int) and isinstance(cs.get("max"), int):
                return cs["min"], cs["max"]
            return None, None
        s = self.stats.get(f.path)
        if s is not None and "min_key" in s:
            return s.get("min_key"), s.get("max_key")
        cs = f.column_stats.get(RECORD_KEY_COL)  # files written by insert_overwrite
        if cs and "min" in cs:
            return cs.get("min"), cs.get("max")
        return None, None


#: Builds the index a keyed write asks (from the table's store, the state it planned on and
#: the table's properties).
IndexFactory: TypeAlias = Callable[[ObjectStore, TableState, KeyedProperties], KeyIndex]


def range_bloom_index(store: ObjectStore, st: TableState, props: KeyedProperties) -> KeyIndex:
    schema = st.schema()
    integer_key = None
    if len(props.record_key) == 1 and schema is not None:
        (col,) = props.record_key
        if col in schema.names and pa.types.is_integer(schema.field(col).type):
            integer_key = col
    return RangeBloomIndex(write_stats_by_path(st), store, integer_key)
