"""Two Parquet files joined into one without decoding their rows: the row groups of a finished
file copied as bytes beside those of a file being written, under one footer.

A file group rewritten only to take new records (a small file filled, none of its rows
updated or deleted) keeps every row of its base file as it is. Decoding those rows and
encoding them again cost more than the new rows themselves (the load's fill commits took
about twice as long as the others). A Parquet file is its magic, its column chunks and a
footer (thrift `FileMetaData`) that names every chunk by its absolute offset, so the base
file's chunks can be copied verbatim after (or before) the new ones, and one footer list
both sets of row groups, the copied ones' offsets shifted by where they now sit.

The footer is read and written with fastparquet's thrift codec (`cencoding.from_buffer`,
`ThriftObject.to_bytes`): it keeps the fields Arrow reads back (statistics, encodings,
the schema, the key-value metadata with `ARROW:schema`); optional fields it does not know
(size statistics) are left out of the new footer.

Row groups of two files can share one footer only when both were written with the same
Parquet schema and the same key-value metadata (`joinable`); the caller decodes otherwise.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq
from fastparquet import cencoding

MAGIC = b"PAR1"

#: Offsets held by a column chunk and by its column metadata (None or absent when unset).
_CHUNK_OFFSETS = ("offset_index_offset", "column_index_offset")
_COLUMN_OFFSETS = (
    "data_page_offset",
    "index_page_offset",
    "dictionary_page_offset",
    "bloom_filter_offset",
)


@dataclass(frozen=True)
class FinishedFile:
    """A complete Parquet file held in memory: its bytes between the leading magic and the
    footer (`body`, at offset 4 in the file), and its footer as pyarrow reads it."""

    data: bytes
    footer_start: int
    footer: pq.FileMetaData

    @classmethod
    def of(cls, data: bytes) -> FinishedFile:
        """`data` parsed (ValueError when it is not a whole Parquet file)."""
        start = footer_start(data)
        if data[:4] != MAGIC:
            raise ValueError("not a Parquet file: no PAR1 magic at the start")
        md = pq.read_metadata(io.BytesIO(MAGIC + data[start:]))
        return cls(data, start, md)

    @property
    def body(self) -> memoryview:
        return memoryview(self.data)[4 : self.footer_start]

    def thrift(self) -> Any:
        """A fresh, settable copy of the footer's thrift `FileMetaData`."""
        return cencoding.from_buffer(self.data[self.footer_start : -8], "FileMetaData")


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


def shift_row_groups(meta: Any, delta: int) -> list[Any]:
    """The row groups of thrift `FileMetaData` `meta` with every byte offset moved by
    `delta` (they are copied to `delta` bytes further into the new file). A column chunk's
    deprecated `file_offset` that Arrow writes as 0 stays 0."""
    groups = list(meta.row_groups or [])
    for rg in groups:
        if rg.file_offset is not None:
            rg.file_offset += delta
        for chunk in rg.columns:
            if chunk.file_offset:
                chunk.file_offset += delta
            _shift(chunk, _CHUNK_OFFSETS, delta)
            if chunk.meta_data is not None:
                _shift(chunk.meta_data, _COLUMN_OFFSETS, delta)
    return groups


def _shift(obj: Any, names: tuple[str, ...], delta: int) -> None:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            setattr(obj, name, value + delta)


def joined_footer(template: Any, groups: list[Any]) -> bytes:
    """The footer of a file holding `groups` (shifted already, in file order), with the
    schema and key-value metadata of thrift `FileMetaData` `template`: the thrift bytes,
    their length and the closing magic."""
    template.row_groups = groups
    template.num_rows = sum(int(rg.num_rows) for rg in groups)
    for i, rg in enumerate(groups):
        if rg.ordinal is not None:
            rg.ordinal = i
    meta = template.to_bytes()
    return bytes(meta) + len(meta).to_bytes(4, "little") + MAGIC


def read_footer(footer: bytes) -> pq.FileMetaData:
    """pyarrow's view of footer bytes as `joined_footer` makes them."""
    return pq.read_metadata(io.BytesIO(MAGIC + footer))


def thrift_of(footer: bytes) -> Any:
    """The thrift `FileMetaData` of footer bytes (metadata, length, magic)."""
    return cencoding.from_buffer(footer[:-8], "FileMetaData")
