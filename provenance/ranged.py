"""Byte ranges of immutable objects: a block cache and a seekable file over an object whose
reads are verified, unit by unit (Parquet footer, row groups), against the checksums its
commit recorded before pyarrow sees them (the file object's shape is storage's `RangedFile`)."""

from __future__ import annotations

import bisect
import io
import threading

import pyarrow.parquet as pq
from cachetools import LRUCache

from storage import IntegrityError, ObjectStore, RangedFile, RangeNotSatisfiable, verify
from timeline import footer_span

from .catalog import NO_SUMS, Sums


class _Blocks(LRUCache[tuple[str, int], bytes]):
    """(key, start) -> bytes, the least recently used dropped past `maxsize` bytes; `by_key`
    indexes each object's blocks by start for range lookups and loses what is dropped."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, getsizeof=len)
        self.by_key: dict[str, dict[int, bytes]] = {}

    def popitem(self) -> tuple[tuple[str, int], bytes]:
        (key, start), data = super().popitem()
        blocks = self.by_key[key]
        del blocks[start]
        if not blocks:
            del self.by_key[key]
        return (key, start), data


class BlockCache:
    """Byte ranges of immutable objects, least recently used evicted past `capacity`."""

    def __init__(self, capacity: int = 256 * 1024 * 1024) -> None:
        self._lock = threading.Lock()
        self._blocks = _Blocks(capacity)

    def find(self, key: str, start: int, length: int) -> bytes | None:
        with self._lock:
            for s, data in self._blocks.by_key.get(key, {}).items():
                if s <= start and start + length <= s + len(data):
                    self._blocks[(key, s)]
                    return data[start - s : start - s + length]
        return None

    def add(self, key: str, start: int, data: bytes) -> None:
        with self._lock:
            if start in self._blocks.by_key.get(key, {}):
                return
            try:
                self._blocks[(key, start)] = data  # drops the least recently used first
            except ValueError:
                return  # larger than the whole cache: not kept
            self._blocks.by_key.setdefault(key, {})[start] = data


class RangedObject(RangedFile):
    """A seekable file over an object: every read is served from the block cache or one GET.

    With checksums (`sums`), bytes enter the cache only as whole verified units (the footer,
    a row group's span): a read of an unverified unit fetches and checks all of it first."""

    def __init__(
        self, store: ObjectStore, key: str, size: int, blocks: BlockCache, sums: Sums = NO_SUMS
    ) -> None:
        super().__init__(size)
        self._store, self._key, self._blocks = store, key, blocks
        self._sums = sums
        #: (start, end, checksum) of the footer once known.
        self._footer: tuple[int, int, str] | None = None
        #: (start, end, checksum) of the units known so far (the footer, then the row groups
        #: too), sorted by start: a read finds the units it touches by a binary search.
        self._units: list[tuple[int, int, str]] = []

    @property
    def where(self) -> str:
        return self._store.url(self._key)

    def verify_footer(self) -> None:
        """Check the footer against its recorded checksum before pyarrow parses it."""
        if not self._sums.footer:
            return
        tail = self._read_raw(self.size - 8, 8)
        try:
            start, length = footer_span(self.size, tail)
        except ValueError as exc:
            raise IntegrityError(f"{self.where} is corrupt: {exc}", self.where) from exc
        self._footer = (start, start + length, self._sums.footer)
        self._units = [self._footer]
        self._fetch_unit(start, start + length, self._sums.footer)

    def verified_metadata(self) -> pq.FileMetaData:
        """The file's metadata, parsed from its verified footer (pyarrow reads nothing else)."""
        self.verify_footer()
        assert self._footer is not None
        s, e, _ = self._footer
        footer = self._blocks.find(self._key, s, e - s)
        if footer is None:  # evicted meanwhile
            footer = self.get(s, e - s)
            verify(footer, self._sums.footer, f"{self.where} bytes [{s}, {e})")
        try:
            return pq.ParquetFile(io.BytesIO(b"PAR1" + footer)).metadata
        except (OSError, ValueError) as exc:  # pyarrow's errors are OSError/ArrowException
            raise IntegrityError(
                f"{self.where}: unreadable Parquet footer: {exc}", self.where
            ) from exc

    def row_group_units(self, spans: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
        """(start, end, checksum) of each row group, for `set_units` (computed once per file
        by the caller: ~490 row groups per merged file)."""
        if len(spans) != len(self._sums.row_groups):
            raise IntegrityError(
                f"{self.where} is corrupt: {len(spans)} row groups, the commit recorded "
                f"{len(self._sums.row_groups)}",
                self.where,
            )
        return [(s, e, c) for (s, e), c in zip(spans, self._sums.row_groups, strict=True)]

    def set_units(self, row_groups: list[tuple[int, int, str]]) -> None:
        """The row groups' units (`row_group_units`), sorted by start, and the footer's."""
        self._units = [*row_groups, self._footer] if self._footer is not None else row_groups
        if self._footer is not None and row_groups and row_groups[-1][1] > self._footer[0]:
            self._units = sorted(self._units)

    def _touching(self, start: int, end: int) -> list[tuple[int, int, str]]:
        """Units overlapping bytes [start, end) (units do not overlap each other)."""
        units = self._units
        i = max(0, bisect.bisect_right(units, (start, -1, "")) - 1)
        out = []
        while i < len(units) and units[i][0] < end:
            if units[i][1] > start:
                out.append(units[i])
            i += 1
        return out

    def get(self, start: int, length: int) -> bytes:
        """One ranged GET; an object shorter than its recorded size is an integrity error."""
        cause: RangeNotSatisfiable | None = None
        try:
            data = self._store.get(self._key, start, length)
        except RangeNotSatisfiable as exc:
            data, cause = b"", exc
        if len(data) != length and self._sums.footer:
            raise IntegrityError(
                f"{self.where} is corrupt: shorter than the {self.size} bytes its commit "
                f"recorded (read {len(data)} of bytes [{start}, {start + length}))",
                self.where,
            ) from cause
        if cause is not None:
            raise cause
        return data

    def _read_raw(self, start: int, length: int) -> bytes:
        data = self._blocks.find(self._key, start, length)
        return data if data is not None else self.get(start, length)

    def _fetch_unit(self, start: int, end: int, checksum: str) -> None:
        if self._blocks.find(self._key, start, end - start) is not None:
            return  # only verified bytes are cached
        data = self.get(start, end - start)
        verify(data, checksum, f"{self.where} bytes [{start}, {end})")
        self._blocks.add(self._key, start, data)

    def _verified_range(self, pos: int, n: int) -> bytes:
        """Bytes [pos, pos+n) with every unit they touch verified (one GET for the range,
        one more per unit that sticks out of it). Only the 4-byte magic lies outside."""
        end = pos + n
        data = bytearray(self.get(pos, n))
        for s, e, c in self._touching(pos, end):
            if pos <= s and e <= end:
                verify(memoryview(data)[s - pos : e - pos], c, f"{self.where} bytes [{s}, {e})")
                continue
            self._fetch_unit(s, e, c)
            lo, hi = max(s, pos), min(e, end)
            piece = self._blocks.find(self._key, lo, hi - lo)
            if piece is None:  # evicted meanwhile: fetch and check the unit again
                whole = self.get(s, e - s)
                verify(whole, c, f"{self.where} bytes [{s}, {e})")
                piece = whole[lo - s : hi - s]
            data[lo - pos : hi - pos] = piece
        return bytes(data)  # not cached: bytes outside every known unit are unverified

    def prefetch(self, start: int, length: int) -> None:
        length = min(length, self.size - start)
        if length <= 0 or self._blocks.find(self._key, start, length) is not None:
            return
        data = self.get(start, length)
        if self._sums.footer:
            self.absorb(start, data)
            return
        self._blocks.add(self._key, start, data)

    def absorb(self, start: int, data: bytes) -> None:
        """Cache the whole units inside bytes [start, start+len(data)) already fetched, each
        verified first (only verified bytes are cached). Adjacent units are cached as one
        block, so a later read across them is still served from the cache."""
        view = memoryview(data)
        runs: list[list[int]] = []
        for s, e, c in self._touching(start, start + len(data)):
            if start <= s and e <= start + len(data):
                verify(view[s - start : e - start], c, f"{self.where} bytes [{s}, {e})")
                if runs and runs[-1][1] == s:
                    runs[-1][1] = e
                else:
                    runs.append([s, e])
        for s, e in runs:
            self._blocks.add(self._key, s, bytes(view[s - start : e - start]))

    def bytes_at(self, start: int, length: int) -> bytes:
        """From the block cache, else one GET (verified unit by unit with checksums; cached
        as read without)."""
        data = self._blocks.find(self._key, start, length)
        if data is None and self._sums.footer:
            data = self._verified_range(start, length)
        if data is None:
            data = self._store.get(self._key, start, length)
            self._blocks.add(self._key, start, data)
        return data


def footer_of(ranged: RangedObject, size: int, tail: bytes) -> tuple[int, int]:
    try:
        return footer_span(size, tail)
    except ValueError as exc:
        raise IntegrityError(f"{ranged.where} is corrupt: {exc}", ranged.where) from exc
