"""A base file whose row groups a new slice copies as bytes (timeline/parquet_splice.py):
which files qualify, and their bytes handed over in file order with their record keys.

A file group rewritten only to take new records keeps every row of its base file, so the
new slice takes the base file's row groups as they are (keyed/write/slice_writer.py). The
base file qualifies when it has the Parquet schema and Arrow schema the new slice is written
with (`copyable`); otherwise, or with `COPY_ROW_GROUPS` off, it is decoded and encoded again.
Its bytes come as keyed/write/base_stream.py reads a base file: a file below `STREAM_MIN`
(or one the locate step kept) whole, its checksum verified before a byte is copied; a bigger
one in pieces of about `STREAM_PIECE` bytes in file order, its CRC-32 computed as they pass
and compared with the recorded checksum after the last piece, before the new slice's upload
is committed (a mismatch aborts it). Of the rows only the record-key column is decoded, a
piece's row groups at a time, for the new slice's key range and bloom filter.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from storage import FetchedRanges, IntegrityError, ObjectStore

from ...errors import committed_object
from ...metadata import DataFile
from ...parquet_io import DEFAULT_CODEC, DICTIONARY_PAGE_LIMIT, read_verified, row_group_spans
from ...parquet_splice import FinishedFile, joinable
from ..keys import RECORD_KEY_COL
from . import base_stream

#: Whether a file group that only takes new records (no row of its base file updated or
#: deleted) has its base file's row groups copied as bytes into the new slice rather than
#: decoded and encoded again. Off, every rewrite decodes, as files whose schema differs from
#: the write's always do.
COPY_ROW_GROUPS = True


class CopiedBase(Protocol):
    """A base file whose row groups are copied: its footer (`footer`, and as bytes), and its
    bytes between the leading magic and the footer in file order with the record keys of the
    row groups each piece completes (`pieces`, read once; a damaged file raises
    `IntegrityError` naming it by the time the last piece is handed over)."""

    footer: pq.FileMetaData

    @property
    def footer_bytes(self) -> bytes: ...

    def pieces(self) -> Iterator[tuple[bytes | memoryview, pa.ChunkedArray]]: ...


class WholeBase:
    """A base file held whole (fetched and verified)."""

    def __init__(self, f: FinishedFile) -> None:
        self._f = f
        self.footer = f.footer

    @property
    def footer_bytes(self) -> bytes:
        return self._f.footer_bytes

    def pieces(self) -> Iterator[tuple[bytes | memoryview, pa.ChunkedArray]]:
        pf = pq.ParquetFile(pa.BufferReader(self._f.data), metadata=self.footer)
        keys = pf.read(columns=[RECORD_KEY_COL], use_threads=False).column(RECORD_KEY_COL)
        yield self._f.body, keys


class RangedBase:
    """A base file read in ranges: its tail (footer) fetched, its row groups in pieces of
    about `STREAM_PIECE` bytes as they are copied."""

    def __init__(
        self,
        store: ObjectStore,
        f: DataFile,
        tail: tuple[int, bytes],
        footer: pq.FileMetaData,
        plan: list[tuple[int, int, int]],
    ) -> None:
        self._store, self._f, self._tail, self._plan = store, f, tail, plan
        self.footer = footer
        data = tail[1]
        self._meta_at = f.size - 8 - int.from_bytes(data[-8:-4], "little")

    @property
    def footer_bytes(self) -> bytes:
        start, data = self._tail
        return data[self._meta_at - start :]

    def pieces(self) -> Iterator[tuple[bytes | memoryview, pa.ChunkedArray]]:
        start, data = self._tail
        window = FetchedRanges(self._f.size, [(start, data)])
        pf = pq.ParquetFile(window, metadata=self.footer)
        crc = base_stream.ChecksumReader(self._store, self._f, start, data)
        kind = self.footer.schema.to_arrow_schema().field(RECORD_KEY_COL).type
        for first, last, end in self._plan:
            at = crc.pos
            piece = crc.fetch(end)
            window.hold([(at, piece)])
            try:
                keys = [
                    pf.read_row_group(i, columns=[RECORD_KEY_COL], use_threads=False)
                    .column(RECORD_KEY_COL)
                    for i in range(first, last)
                ]  # fmt: skip
            except (OSError, pa.ArrowException):
                crc.check_rest()  # bytes not verified yet: the checksum says which it is
                raise
            chunks = [c for k in keys for c in k.chunks]
            yield memoryview(piece)[4 - at if at < 4 else 0 :], pa.chunked_array(chunks, kind)
        window.hold([])
        crc.check_rest()


def _empty_footer(schema: pa.Schema) -> pq.FileMetaData:
    """The footer a new slice of `schema` gets, of an empty file written with the slice
    writer's options."""
    buf = io.BytesIO()
    pq.ParquetWriter(
        buf, schema, compression=DEFAULT_CODEC, dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT
    ).close()
    return pq.read_metadata(io.BytesIO(buf.getvalue()))


class SliceFooters:
    """The footers empty new slices get, one per schema (its metadata included), kept by
    one write for every file group it may copy: an empty file is encoded once per schema,
    not once per group. Only read once made (`joinable`); two threads asking at once may
    both make one, either kept."""

    def __init__(self) -> None:
        self._by_schema: dict[bytes, pq.FileMetaData] = {}

    def of(self, schema: pa.Schema) -> pq.FileMetaData:
        key = schema.serialize().to_pybytes()
        md = self._by_schema.get(key)
        if md is None:
            md = self._by_schema[key] = _empty_footer(schema)
        return md


def copyable(
    footer: pq.FileMetaData, schema: pa.Schema, footers: SliceFooters | None = None
) -> bool:
    """Whether the row groups of a file with `footer` can be copied as bytes into a new
    slice of `schema`: copying is on and the file was written with the Parquet schema and
    Arrow schema a new slice gets (`parquet_splice.joinable`; `footers`: the write's kept
    empty slice footers, else one is encoded now)."""
    if not COPY_ROW_GROUPS:
        return False
    return joinable(footer, (footers or SliceFooters()).of(schema))


def base_to_copy(
    store: ObjectStore,
    base: DataFile,
    schema: pa.Schema,
    body: bytes | None = None,
    footers: SliceFooters | None = None,
) -> tuple[CopiedBase | None, bytes | None]:
    """The base file whose row groups a new slice of `schema` copies (`body`: its bytes,
    verified already), or None, with the bytes fetched if any, when it must be decoded: it
    is not `copyable`, or read in ranges its row groups are not laid out in order up to the
    footer. A file that is not Parquet raises `IntegrityError` naming the object. `footers`:
    the write's (see `copyable`)."""
    if not COPY_ROW_GROUPS:
        return None, body
    where = store.url(base.path)
    if body is None and base_stream.ranged(base):
        return _ranged(store, base, schema, footers), None
    data = body if body is not None else read_verified(store, base)
    try:
        finished = FinishedFile.of(data)
    except (ValueError, OSError, pa.ArrowException) as exc:
        raise IntegrityError(f"{where} is corrupt: {exc}", where) from exc
    lead = WholeBase(finished) if copyable(finished.footer, schema, footers) else None
    return lead, data


def _ranged(
    store: ObjectStore, base: DataFile, schema: pa.Schema, footers: SliceFooters | None
) -> RangedBase | None:
    """A big base file to copy in pieces, when its row groups end where its footer starts
    (nothing after them a copy in pieces would leave out) and are laid out in order."""
    with committed_object(store.url(base.path)):
        start, tail, md = base_stream.read_tail(store, base)
    if not copyable(md, schema, footers):
        return None
    spans = row_group_spans(md)
    meta_at = base.size - 8 - int.from_bytes(tail[-8:-4], "little")
    plan = base_stream.piece_plan(spans, base_stream.STREAM_PIECE)
    if plan is None or (spans and spans[-1][1] != meta_at) or (spans and spans[0][0] != 4):
        return None
    return RangedBase(store, base, (start, tail), md, plan)
