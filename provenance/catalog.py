"""Committed event files, as the provenance table's timeline sees them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from timeline import DataFile, checksummed

from .layout import EVENTS_PARTITION, INDEX_PARTITION, JournalRef


@dataclass(frozen=True)
class Sums:
    """Checksums of one Parquet file as its commit recorded them (empty = legacy file): the
    whole file (verified when a local copy is filled), its footer and each row group's byte
    span (verified by ranged readers before pyarrow parses them)."""

    whole: str = ""
    footer: str = ""
    row_groups: tuple[str, ...] = ()

    @staticmethod
    def of(f: DataFile) -> Sums:
        return Sums(f.checksum, f.footer_checksum, f.row_group_checksums)

    @staticmethod
    def of_bytes(body: bytes) -> Sums:
        return Sums.of(checksummed(DataFile("", len(body), 0), body, ranged=True))

    def apply(self, f: DataFile) -> DataFile:
        return replace(
            f, checksum=self.whole, footer_checksum=self.footer, row_group_checksums=self.row_groups
        )


NO_SUMS = Sums()


@dataclass(frozen=True)
class EventFile:
    """One merged Parquet file (events [first_id, end_id)) and its term index."""

    first_id: int
    end_id: int
    events_key: str
    events_size: int
    index_key: str | None
    index_size: int
    rows: int
    min_time: int
    max_time: int
    min_size: int
    max_size: int
    events_sums: Sums = Sums()
    index_sums: Sums = Sums()

    @property
    def size(self) -> int:
        return self.events_size + self.index_size


@dataclass(frozen=True)
class Snapshot:
    """What a reader sees: committed files, plus journals not merged yet (ids >= high_water)."""

    files: tuple[EventFile, ...]
    journals: tuple[JournalRef, ...]
    high_water: int

    @property
    def max_event_id(self) -> int:
        ends = [f.end_id for f in self.files] + [j.end_id for j in self.journals]
        return max(ends) - 1 if ends else -1


def stats(column_stats: Mapping[str, Mapping[str, Any]], name: str) -> tuple[int, int]:
    s = column_stats.get(name, {})
    return int(s.get("min", 0)), int(s.get("max", 0))


def event_files(files: Iterable[DataFile], table_prefix: str) -> tuple[EventFile, ...]:
    """Pair each events file with its index file (same file group suffix)."""
    index: dict[str, DataFile] = {}
    events: list[DataFile] = []
    for f in files:
        if f.partition == INDEX_PARTITION:
            index[f.file_group.removeprefix("index-")] = f
        elif f.partition == EVENTS_PARTITION:
            events.append(f)
    out = []
    for f in events:
        group = f.file_group.removeprefix("events-")
        idx = index.get(group)
        first, last = stats(f.column_stats, "event_id")
        tmin, tmax = stats(f.column_stats, "event_time")
        smin, smax = stats(f.column_stats, "file_size")
        out.append(
            EventFile(
                first_id=first,
                end_id=last + 1,
                events_key=table_prefix + f.path,
                events_size=f.size,
                index_key=table_prefix + idx.path if idx else None,
                index_size=idx.size if idx else 0,
                rows=f.rows,
                min_time=tmin,
                max_time=tmax,
                min_size=smin,
                max_size=smax,
                events_sums=Sums.of(f),
                index_sums=Sums.of(idx) if idx else Sums(),
            )
        )
    return tuple(sorted(out, key=lambda e: e.first_id))


def file_containing(files: Sequence[EventFile], event_id: int) -> EventFile | None:
    """The file named by the greatest first id <= event_id (NiFi's lookup by name)."""
    lo, hi = 0, len(files)
    while lo < hi:
        mid = (lo + hi) // 2
        if files[mid].first_id <= event_id:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return None
    f = files[lo - 1]
    return f if event_id < f.end_id else None
