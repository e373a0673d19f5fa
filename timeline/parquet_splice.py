"""A finished Parquet file's row groups copied as bytes at the head of a file being written,
under one footer, without decoding their rows.

A file group rewritten only to take new records (a small file filled, none of its rows
updated or deleted) keeps every row of its base file as it is. Decoding those rows and
encoding them again cost more than the new rows themselves (the load's fill commits took
about twice as long as the others). A Parquet file is its magic, its column chunks and a
footer (thrift `FileMetaData`) that names every chunk by its absolute offset. So the new
file is: the Parquet writer's magic, the finished file's column chunks verbatim at the
offsets they had (its body starts after its own magic, at offset 4, as here), then the
writer's row groups, whose offsets the writer counts from its position in the file it
writes, and one footer: the finished file's `FileMetaData` with the writer's row groups
appended (pyarrow's `FileMetaData.append_row_groups`, which also sums the row counts). No
offset is rewritten, so no thrift codec is needed beyond pyarrow's own.

Row groups of two files can share one footer only when both were written with the same
Parquet schema and the same key-value metadata (`joinable`); the caller decodes otherwise.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pyarrow.parquet as pq

MAGIC = b"PAR1"


@dataclass(frozen=True)
class FinishedFile:
    """A complete Parquet file held in memory: its bytes, where its footer starts and the
    footer as pyarrow reads it."""

    data: bytes
    footer_start: int
    footer: pq.FileMetaData

    @classmethod
    def of(cls, data: bytes) -> FinishedFile:
        """`data` parsed (ValueError when it is not a whole Parquet file)."""
        start = footer_start(data)
        if data[:4] != MAGIC:
            raise ValueError("not a Parquet file: no PAR1 magic at the start")
        return cls(data, start, read_footer(data[start:]))

    @property
    def body(self) -> memoryview:
        """The column chunks: the bytes between the leading magic and the footer."""
        return memoryview(self.data)[4 : self.footer_start]

    @property
    def footer_bytes(self) -> bytes:
        return self.data[self.footer_start :]


def footer_start(data: bytes) -> int:
    """Where a whole Parquet file's footer (thrift metadata, its length, the magic) starts."""
    if len(data) < 12 or data[-4:] != MAGIC:
        raise ValueError("not a Parquet file: no PAR1 magic at the end")
    start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    if start < 4:
        raise ValueError("Parquet footer length exceeds the file size")
    return start


def joinable(a: pq.FileMetaData, b: pq.FileMetaData) -> bool:
    """Whether the row groups of `a` and `b` can sit in one file under either's footer: the
    same Parquet schema (columns, physical and logical types, repetition) and the same
    key-value metadata (the Arrow schema readers rebuild the columns from). Compression and
    encodings are per column chunk and may differ."""
    return bool(a.schema.equals(b.schema)) and (a.metadata or {}) == (b.metadata or {})


def read_footer(footer: bytes) -> pq.FileMetaData:
    """pyarrow's view of footer bytes (thrift metadata, its length, the magic)."""
    return pq.read_metadata(io.BytesIO(MAGIC + footer))


def joined_footer(lead: bytes, writer: bytes) -> tuple[bytes, pq.FileMetaData]:
    """The footer of a file whose row groups are those of footer `lead` (a finished file's,
    its chunks copied at their own offsets) then those of footer `writer` (the Parquet
    writer's, counted from the same file's start): `lead`'s schema and key-value metadata,
    both sets of row groups in file order, the summed row count. As bytes, and as pyarrow
    holds it (what the bytes parse to, without parsing them again)."""
    md = read_footer(lead)
    md.append_row_groups(read_footer(writer))
    out = io.BytesIO()
    md.write_metadata_file(out)
    return out.getvalue()[len(MAGIC) :], md  # a metadata file is the magic, then the footer
