"""The rows of a committed file whose record key is among some keys, read by ranged GETs of
the key (and ordering) column chunks only.

Locating a batch's records fetched each candidate file whole and decoded its key column
whole, so the bytes a write held grew with its files (and the table). A file of
`STREAM_MIN` bytes or more (that holds a checksum) is read here as its footer (one ranged
GET of the tail, `base_stream.read_tail`), then, for each row group whose key statistics
(min/max) can hold one of the probed keys, the chunks of the wanted columns: ranges closer
than `COALESCE_GAP` are fetched by one GET, each piece decoded (pyarrow over `FetchedRanges`, a
file object that serves only the bytes fetched) and dropped before the next is fetched.
Smaller files are fetched whole (one GET) and verified against their checksum.

What a ranged read verifies: the footer parses, every chunk fetched has the length the
footer states, and its pages decode (with their page checksums where the writer stored
them). A piece that fails to decode sends the whole file through its checksum check, so a
damaged object raises `IntegrityError` naming it. The whole file's checksum is verified by
the rewrite of every file the write changes (it streams the whole file,
keyed/write/base_stream.py) before the commit, as before.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage import FetchedRanges, IntegrityError, ObjectStore

from ...errors import committed_object
from ...metadata import DataFile
from ...parquet_io import read_verified
from ..keys import RECORD_KEY_COL
from .base_stream import ranged, read_tail

MiB = 1024 * 1024
#: Column chunks closer than this are fetched by one GET (the bytes between them are read
#: and dropped): a request costs more than a MiB of transfer on S3.
COALESCE_GAP = 1 * MiB


@dataclass(frozen=True)
class Matches:
    """The rows of one file whose key was probed: positions (ascending) and their values
    of the columns asked for (those the file holds)."""

    rows: np.ndarray
    data: pa.Table | None
    row_groups_read: int = 0
    row_groups_skipped: int = 0


def chunk_span(md: pq.FileMetaData, rg: int, col: int) -> tuple[int, int]:
    """[start, end) of one column chunk (its dictionary page first, when it has one)."""
    c = md.row_group(rg).column(col)
    start = c.data_page_offset
    if c.has_dictionary_page and c.dictionary_page_offset is not None:
        start = min(start, c.dictionary_page_offset)
    return start, start + c.total_compressed_size


def coalesce(spans: Sequence[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Sorted spans merged where they overlap or lie within `gap` bytes of each other."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= gap:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def may_hold(md: pq.FileMetaData, rg: int, col: int, probed: list[str]) -> bool:
    """Whether row group `rg` can hold one of `probed` (sorted) by its key column's
    statistics (True when it has none)."""
    stats = md.row_group(rg).column(col).statistics
    if stats is None or not stats.has_min_max:
        return True
    lo, hi = stats.min, stats.max
    if isinstance(lo, bytes) or isinstance(hi, bytes):
        lo, hi = _text(lo), _text(hi)
    i = bisect.bisect_left(probed, lo)
    return i < len(probed) and probed[i] <= hi


def _text(v: object) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _groups(
    md: pq.FileMetaData, cols: list[int], wanted: list[int]
) -> Iterator[tuple[tuple[int, int], list[int]]]:
    """(byte range, row groups) per GET: the wanted row groups' chunks of `cols`, adjacent
    ones coalesced (a row group's chunks always in one GET)."""
    spans: list[tuple[int, int, int]] = []
    for rg in wanted:
        s = coalesce([chunk_span(md, rg, c) for c in cols], COALESCE_GAP)
        spans.append((s[0][0], s[-1][1], rg))
    current: tuple[int, int] | None = None
    members: list[int] = []
    for start, end, rg in spans:
        if current is not None and start >= current[1] and start - current[1] <= COALESCE_GAP:
            current = (current[0], end)
            members.append(rg)
            continue
        if current is not None:
            yield current, members
        current, members = (start, end), [rg]
    if current is not None:
        yield current, members


def _match(data: pa.Table, keys: pa.Array, first_row: int) -> tuple[np.ndarray, pa.Table]:
    hit = pc.indices_nonzero(pc.is_in(data.column(RECORD_KEY_COL), value_set=keys))
    rows = np.asarray(hit.to_numpy(), dtype=np.int64) + first_row
    return rows, data.take(hit)


def _gather(rows: list[np.ndarray], found: list[pa.Table], read: int, skipped: int) -> Matches:
    found = [t for t in found if t.num_rows]
    if not found:
        return Matches(np.empty(0, dtype=np.int64), None, read, skipped)
    return Matches(np.concatenate(rows), pa.concat_tables(found), read, skipped)


def whole_matches(pf: pq.ParquetFile, columns: Sequence[str], keys: pa.Array) -> Matches:
    """`matching_rows` over a file already fetched (and verified), a row group at a time."""
    present = set(pf.schema_arrow.names)
    cols = [c for c in columns if c in present]
    rows, found, start = [], [], 0
    for i in range(pf.num_row_groups):
        data = pf.read_row_group(i, columns=cols, use_threads=False)
        r, t = _match(data, keys, start)
        rows.append(r)
        found.append(t)
        start += data.num_rows
    return _gather(rows, found, pf.num_row_groups, 0)


def matching_rows(
    store: ObjectStore, f: DataFile, columns: Sequence[str], keys: pa.Array
) -> Matches:
    """The rows of committed file `f` whose record key (`columns[0]`) is among `keys`, with
    their values of `columns` (those the file holds), read as the module's text says."""
    if not ranged(f):
        body = read_verified(store, f)
        return whole_matches(pq.ParquetFile(pa.BufferReader(body)), columns, keys)
    where = store.url(f.path)
    _, _, md = read_tail(store, f)
    names = md.schema.to_arrow_schema().names
    cols = [names.index(c) for c in columns if c in names]
    if not cols or names[cols[0]] != RECORD_KEY_COL:
        raise IntegrityError(f"{where} is corrupt: it has no {RECORD_KEY_COL} column", where)
    probed = sorted(_text(k) for k in keys.to_pylist())
    wanted = [rg for rg in range(md.num_row_groups) if may_hold(md, rg, cols[0], probed)]
    first = np.cumsum([0] + [md.row_group(i).num_rows for i in range(md.num_row_groups)])
    window = FetchedRanges(f.size)
    pf = pq.ParquetFile(window, metadata=md, page_checksum_verification=True)
    rows, found = [], []
    for (start, end), members in _groups(md, cols, wanted):
        with committed_object(where):
            piece = store.get(f.path, start, end - start)
        if len(piece) != end - start:
            raise IntegrityError(
                f"{where} is corrupt: {len(piece)} bytes at {start}, the footer says "
                f"{end - start}", where,
            )  # fmt: skip
        window.hold([(start, piece)])
        for rg in members:
            try:
                data = pf.read_row_group(rg, columns=[names[c] for c in cols], use_threads=False)
            except (OSError, pa.ArrowException):
                # Damaged bytes or not: the checksum of the whole file decides which.
                read_verified(store, f)
                raise
            r, t = _match(data, keys, int(first[rg]))
            rows.append(r)
            found.append(t)
        window.hold([])
    return _gather(rows, found, len(wanted), md.num_row_groups - len(wanted))
