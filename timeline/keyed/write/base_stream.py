"""A rewrite's base file read by ranged GETs, a few row groups at a time.

A rewrite whose base file was not kept from the locate step fetched the whole file and held
its bytes while it encoded the new one, so the bytes in flight grew with the file. Here a
file of `STREAM_MIN` bytes or more is read as its footer first (one ranged GET of the tail,
as `read_footer`), then its row groups in file order, in GETs of about `STREAM_PIECE` bytes,
each row group decoded and handed on before the next piece is fetched. The file's CRC-32 is
computed as the pieces arrive (every byte once, in order) and compared with the checksum its
commit recorded after the last row group: a mismatch raises `IntegrityError` before the new
slice's upload is committed, so the damaged rows never reach a commit. Smaller files, files
written before checksums and files whose row groups are not laid out in order are fetched
whole and verified first, as every read of a committed file is.

However it is fetched, a row group is decoded `DECODE_ROWS` rows at a time (Arrow's record
batch reader over the row group's column chunks), not whole: a rewrite filters each piece as
it comes, so it holds one piece of a row group decoded next to the kept rows its encoder
gathers (at most a row group of them), not a decoded row group and its filtered copy, which
grew with the file until the file held two row groups.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from storage import FetchedRanges, IntegrityError, ObjectStore
from storage.checksum import format_checksum

from ...errors import committed_object
from ...file_stats import FOOTER_TAIL
from ...metadata import DataFile
from ...parquet_io import footer_span, read_verified, row_group_spans

MiB = 1024 * 1024
#: A file of this size or more is read in ranges (a smaller one whole, by one GET). At 8 MiB
#: the upsert benchmark's ~13 MiB files at 50M rows took 2.4x the GETs and peaked higher
#: (random upsert 1,024 against 950 MiB, docs/benchmarks.md), so small files stay whole.
STREAM_MIN = 16 * MiB
STREAM_PIECE = 8 * MiB
#: Rows of a row group decoded at a time for a rewrite (about 1.6 MiB of the upsert
#: benchmark's ten columns; a row group of 131,072 rows is 13 MiB decoded).
DECODE_ROWS = 16_384


def piece_plan(spans: list[tuple[int, int]], piece: int) -> list[tuple[int, int, int]] | None:
    """(first, last, end) per GET: row groups [first, last) end at byte `end`, each GET
    starting where the previous one ended and holding at least `piece` bytes but the last;
    None when the row groups are not laid out in order."""
    out: list[tuple[int, int, int]] = []
    pos, first = 0, 0
    for i, (start, end) in enumerate(spans):
        if start < pos:
            return None
        pos = end
        if end - (out[-1][2] if out else 0) >= piece:
            out.append((first, i + 1, end))
            first = i + 1
    if first < len(spans):
        out.append((first, len(spans), spans[-1][1]))
    return out


def read_tail(store: ObjectStore, f: DataFile) -> tuple[int, bytes, pq.FileMetaData]:
    """The file's last bytes, from at least the start of its footer, and the footer (one
    ranged GET of the tail, a second when the footer is longer than `FOOTER_TAIL`); a tail
    that is not a Parquet footer raises `IntegrityError` naming the object."""
    where = store.url(f.path)
    start = max(0, f.size - FOOTER_TAIL)
    with committed_object(where):
        tail = store.get(f.path, start, f.size - start)
        try:
            begin, _ = footer_span(f.size, tail)
            if begin < start:
                tail = store.get(f.path, begin, start - begin) + tail
                start = begin
            md = pq.read_metadata(io.BytesIO(b"PAR1" + tail[begin - start :]))
        except (ValueError, OSError, pa.ArrowException) as exc:
            raise IntegrityError(f"{where} is corrupt: {exc}", where) from exc
    return start, tail, md


def ranged(f: DataFile) -> bool:
    """Whether committed file `f` is read by ranged GETs (`STREAM_MIN` bytes or more, with
    a recorded checksum) rather than fetched whole."""
    return f.size >= STREAM_MIN and bool(f.checksum)


def held_bytes(f: DataFile) -> int:
    """About the most bytes of `f` that `base_row_groups` holds at once (its whole size
    when it is fetched whole)."""
    return STREAM_MIN if ranged(f) else f.size


def base_row_groups(
    store: ObjectStore, f: DataFile, body: bytes | None = None
) -> Iterator[pa.Table]:
    """The rows of committed file `f`, all columns, in file order, decoded a piece of a
    row group at a time (see the module's text for how it is fetched and verified);
    `body`: its bytes, fetched and verified already (nothing is fetched then)."""
    if body is not None or not ranged(f):
        whole = body if body is not None else read_verified(store, f)
        yield from row_groups_of(pq.ParquetFile(pa.BufferReader(whole)))
        return
    tail_start, tail, md = read_tail(store, f)
    pieces = piece_plan(row_group_spans(md), STREAM_PIECE)
    if pieces is None:
        yield from row_groups_of(pq.ParquetFile(pa.BufferReader(read_verified(store, f))))
        return
    window = FetchedRanges(f.size, [(tail_start, tail)])
    pf = pq.ParquetFile(window, metadata=md)
    crc = ChecksumReader(store, f, tail_start, tail)
    for first, last, end in pieces:
        window.hold([(crc.pos, crc.fetch(end))])
        for i in range(first, last):
            try:
                yield from _decoded(pf, i)
            except (OSError, pa.ArrowException):
                # Bytes not verified yet may be damaged: the checksum decides which it is.
                crc.check_rest()
                raise
    window.hold([])
    crc.check_rest()


class ChecksumReader:
    """The CRC-32 of a file read in pieces in file order, from offset 0."""

    def __init__(self, store: ObjectStore, f: DataFile, tail_start: int, tail: bytes) -> None:
        self._store, self._f = store, f
        self._tail_start, self._tail = tail_start, tail
        self.crc, self.pos = 0, 0

    def fetch(self, end: int) -> bytes:
        """Bytes [pos, end), fetched and added to the checksum."""
        with committed_object(self._store.url(self._f.path)):
            data = self._store.get(self._f.path, self.pos, end - self.pos)
        self.crc = zlib.crc32(data, self.crc)
        self.pos = end
        return data

    def check_rest(self) -> None:
        """Add what is left of the file (up to the tail, then the tail held) and raise
        `IntegrityError` unless the whole matches the checksum its commit recorded."""
        while self.pos < self._tail_start:  # e.g. page indexes after the row groups
            self.fetch(min(self._tail_start, self.pos + STREAM_PIECE))
        self.crc = zlib.crc32(memoryview(self._tail)[self.pos - self._tail_start :], self.crc)
        self.pos = self._f.size
        got, where = format_checksum(self.crc), self._store.url(self._f.path)
        if got != self._f.checksum:
            raise IntegrityError(
                f"{where} is corrupt: checksum {got} != recorded {self._f.checksum} "
                f"(read in ranges for its rewrite); the object was damaged or truncated",
                where,
            )


def row_groups_of(pf: pq.ParquetFile) -> Iterator[pa.Table]:
    """The rows of an open (verified) file, all columns, in file order, decoded at most
    `DECODE_ROWS` rows at a time."""
    for i in range(pf.num_row_groups):
        yield from _decoded(pf, i)


def _decoded(pf: pq.ParquetFile, i: int) -> Iterator[pa.Table]:
    """Row group `i` of `pf`, decoded `DECODE_ROWS` rows at a time (each piece in the
    file's Arrow schema, its metadata included, as `read_row_group` gives it)."""
    schema = pf.schema_arrow
    # use_threads=False: Arrow's pools are never started here (see parquet_io._read_one).
    batches = pf.iter_batches(DECODE_ROWS, row_groups=[i], use_threads=False)
    for batch in batches:
        yield pa.Table.from_batches([batch], schema)
