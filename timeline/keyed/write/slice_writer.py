"""A file group's new base file, decoded and encoded a row group at a time and streamed to
the store.

A copy-on-write rewrite keeps most of its base file's rows. Decoding the whole base file,
filtering it and concatenating the new rows holds several copies of the file's rows at
once, and encoding the new file into a buffer (then copying it for the PUT) holds it two or
three times over, so a writer's memory grew with the size of its files (and the table). Here
the base file's row groups are decoded one at a time (`read_row_group`), filtered and encoded
straight into an upload of the new file (`ObjectStore.open_writer`: a temp file locally, a
multipart upload on S3 once it outgrows one part), its checksum and size counted as the
bytes pass. The writer holds the base file's bytes, one row group decoded, the row group
being encoded, the upload's buffer and the new file's record keys (for its bloom filter).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage import ObjectStore
from storage.checksum import format_checksum

from ...file_stats import describe_footer
from ...layout import data_instant_time
from ...metadata import DataFile
from ...parquet_io import DICTIONARY_PAGE_LIMIT
from ...schema import conform
from ..index import BloomFilter, bloom_ref
from ..keys import RECORD_KEY_COL, key_range
from .base_stream import base_row_groups, row_groups_of


class Sink(Protocol):
    """Where an encoded file's bytes go, in order (an `ObjectWriter`, a `BytesIO`)."""

    def write(self, data: bytes, /) -> int: ...


@dataclass(frozen=True)
class EncodedSlice:
    """A new base file as it was streamed to its sink: its size, checksum and footer, and
    its record keys (for the bloom filter and the key range)."""

    size: int
    checksum: str
    footer: pq.FileMetaData
    keys: pa.ChunkedArray

    @property
    def rows(self) -> int:
        return int(self.footer.num_rows)


@dataclass(frozen=True)
class WrittenSlice:
    """A new base file in the store: its `DataFile` and its record keys."""

    file: DataFile
    keys: pa.ChunkedArray

    @property
    def rows(self) -> int:
        return self.file.rows


class _Counted:
    """The file object the Parquet writer writes into: every piece goes on to `sink` and
    into the running CRC-32 and size, so the file is never held whole. Closing it closes
    nothing (the caller commits or aborts the upload)."""

    def __init__(self, sink: Sink) -> None:
        self._sink: Sink | None = sink
        self.crc = 0
        self.size = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        if self._sink is None:  # abandoned: the upload was aborted
            return len(data)
        self._sink.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        """Nothing is buffered here."""

    def close(self) -> None:
        self.closed = True

    def detach(self) -> None:
        """Drop whatever is written from now on (the file is being abandoned)."""
        self._sink = None


@dataclass(frozen=True)
class SliceOut:
    """Where one write's new slices go: instant `t`, at `data_key(partition, name)`, in
    `schema`. `task` names the engine task attempt writing them ("" in one process): it is
    part of every rewritten slice's name, so a retried attempt never overwrites a slice an
    earlier attempt may have reported."""

    t: str
    data_key: Callable[[str, str], str]
    schema: pa.Schema
    task: str = ""

    def slice_key(self, partition: str, group: str) -> str:
        tag = f"{self.task}_" if self.task else ""
        return self.data_key(partition, f"{group}_{tag}{self.t}.parquet")


def base_rows(
    store: ObjectStore,
    base: DataFile,
    drop: set[int],
    schema: pa.Schema,
    rows_per_batch: int,
    *,
    body: bytes | None = None,
) -> Iterator[pa.Table]:
    """The rows of `base` that stay (positions in `drop` left out), in the table's schema,
    one row group decoded at a time. The file is checked against its recorded checksum, as
    every read of a committed file is (`body`: its bytes, already fetched and checked; else
    it is fetched as keyed/write/base_stream.py says)."""
    if body is not None:
        groups = row_groups_of(pq.ParquetFile(pa.BufferReader(body)))
    else:
        groups = base_row_groups(store, base)
    keep: np.ndarray | None = None
    if drop:
        keep = np.ones(base.rows, dtype=bool)
        keep[np.fromiter(drop, dtype=np.int64, count=len(drop))] = False
    return kept_rows(groups, keep, schema, rows_per_batch)


def kept_rows(
    groups: Iterable[pa.Table], keep: np.ndarray | None, schema: pa.Schema, rows_per_batch: int
) -> Iterator[pa.Table]:
    """The rows of a file's decoded row groups (`groups`, in order) where `keep` is True
    (all when None), in the table's schema, handed on at most `rows_per_batch` rows at a
    time (a file from another writer may have bigger row groups)."""
    start = 0
    for part in groups:
        n = part.num_rows
        if keep is not None:
            if start + n > len(keep):
                raise ValueError(f"the file holds more rows than the {len(keep)} recorded")
            part = part.filter(pa.array(keep[start : start + n]))
        start += n
        for offset in range(0, part.num_rows, rows_per_batch):
            yield conform(part.slice(offset, rows_per_batch), schema)


def new_rows(incoming: pa.Table, positions: list[int], schema: pa.Schema,
             rows_per_batch: int) -> Iterator[pa.Table]:  # fmt: skip
    """The batch rows at `positions`, in the table's schema, `rows_per_batch` at a time."""
    for i in range(0, len(positions), rows_per_batch):
        take = pa.array(positions[i : i + rows_per_batch], pa.int64())
        yield conform(incoming.take(take), schema)


class SliceEncoder:
    """One Parquet file encoded incrementally (zstd and small dictionaries, as
    `to_parquet_bytes`) into `sink`: parts are added as they come and gathered into full row
    groups of `rows_per_group` rows (the last may be shorter), so a file of kept and new rows,
    or of a stream's small batches, is not cut into small row groups. The record keys written
    are kept for the file's bloom filter and key range."""

    def __init__(self, schema: pa.Schema, rows_per_group: int, sink: Sink) -> None:
        self._out = _Counted(sink)
        self._schema = schema
        self._rows_per_group = rows_per_group
        self._writer = pq.ParquetWriter(
            self._out, schema, compression="zstd", dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT
        )
        self._keys: list[pa.Array] = []
        self._pending: list[pa.Table] = []
        self.held = 0  # rows added but not encoded yet
        self.rows = 0  # rows added

    def add(self, part: pa.Table) -> None:
        self._pending.append(part)
        self.held += part.num_rows
        self.rows += part.num_rows
        while self.held >= self._rows_per_group:
            self._flush(self._rows_per_group)

    def _flush(self, upto: int) -> None:
        t = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        done, rest = t.slice(0, upto), t.slice(upto)
        self._writer.write_table(done, row_group_size=self._rows_per_group)
        self._keys.extend(done.column(RECORD_KEY_COL).chunks)
        self._pending, self.held = ([rest] if rest.num_rows else []), rest.num_rows

    def finish(self) -> EncodedSlice:
        """Encode what is held and write the footer (an empty file still carries the
        schema)."""
        if self.held:
            self._flush(self.held)
        self._writer.close()
        key_type = self._schema.field(RECORD_KEY_COL).type
        out = self._out
        keys = pa.chunked_array(self._keys, key_type)
        return EncodedSlice(out.size, format_checksum(out.crc), self._writer.writer.metadata, keys)

    def abandon(self) -> None:
        """Close the Parquet writer without writing to the sink (its upload is aborted), so
        nothing writes into it later."""
        self._out.detach()
        self._pending.clear()
        self._writer.close()


def encode_slice(
    parts: Iterable[pa.Table], schema: pa.Schema, rows_per_group: int, sink: Sink
) -> EncodedSlice:
    """Encode `parts` into one Parquet file streamed to `sink` (see `SliceEncoder`)."""
    enc = SliceEncoder(schema, rows_per_group, sink)
    try:
        for part in parts:
            enc.add(part)
        return enc.finish()
    except BaseException:
        enc.abandon()
        raise


def write_slice(
    store: ObjectStore, key: str, parts: Iterable[pa.Table], schema: pa.Schema,
    rows_per_group: int, partition: str, group: str,
) -> WrittenSlice:  # fmt: skip
    """Encode `parts` (as `encode_slice`) straight into a streaming upload of `key`,
    committed when the last row group and the footer are written (aborted, leaving
    nothing, if encoding fails)."""
    with store.open_writer(key) as upload:
        encoded = encode_slice(parts, schema, rows_per_group, upload)
    f = describe_footer(key, encoded.size, encoded.checksum, encoded.footer, partition, group)
    return WrittenSlice(f, encoded.keys)


def slice_stats(
    store: ObjectStore,
    written: WrittenSlice,
    base: DataFile | None,
    counts: tuple[int, int, int],
    fpp: float,
    *,
    superset: BloomFilter | None = None,
) -> dict[str, Any]:
    """The write stats of a new slice (docs/tables.md, "Commit metadata"): the slice it
    supersedes, inserts/updates/deletes, rows, bytes, key range and bloom filter
    (`superset`: a filter holding all of its keys, kept instead of building one)."""
    f = written.file
    inserts, updates, deletes = counts
    lo, hi = key_range(written.keys)
    return {
        "path": f.path,
        "file_group": f.group,
        "partition": f.partition,
        "prev_commit": data_instant_time(base.path) if base else None,
        "prev_path": base.path if base else None,
        "inserts": inserts,
        "updates": updates,
        "deletes": deletes,
        "rows": written.rows,
        "bytes": f.size,
        "min_key": lo,
        "max_key": hi,
        **bloom_ref(store, f.path, written.keys, fpp, superset=superset),
    }
