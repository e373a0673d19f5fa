"""A file group's new base file, decoded and encoded a row group at a time and streamed to
the store.

A copy-on-write rewrite keeps most of its base file's rows. Decoding the whole base file,
filtering it and concatenating the new rows holds several copies of the file's rows at
once, and encoding the new file into a buffer (then copying it for the PUT) holds it two or
three times over, so a writer's memory grew with the size of its files (and the table). Here
the base file's row groups are decoded one at a time (`read_row_group`), filtered and encoded
straight into an upload of the new file (`ObjectStore.open_writer`: a temp file locally, a
multipart upload on S3 once it outgrows one part), its checksum and size counted as the
bytes pass. The writer holds a piece of the base file's bytes, one row group decoded, the row
group being encoded, up to `SINK_CHUNK` of encoded pages, the upload's buffer and the new
file's bloom filter, sized up front for its key count and filled a row group at a time (one
byte per filter bit until it is packed).

A file group that only takes new records keeps its base file's rows unchanged: those are not
decoded at all, the base file's row groups are copied into the new file as bytes ahead of the
new rows' (`SliceEncoder`'s `lead`; keyed/write/base_copy.py says which files qualify,
timeline/parquet_splice.py how the footers are joined).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage import ObjectStore
from storage.checksum import format_checksum

from ...file_stats import describe_footer
from ...layout import data_instant_time
from ...metadata import DataFile
from ...parquet_io import DEFAULT_CODEC, DICTIONARY_PAGE_LIMIT
from ...parquet_splice import MAGIC, footer_start, joined_footer
from ...schema import conform
from ..index import BloomBuilder, BloomFilter, filter_ref
from ..keys import COMMIT_TIME_COL, RECORD_KEY_COL, key_range
from .base_copy import CopiedBase
from .base_stream import base_row_groups

#: How many encoded bytes the Parquet writer's pages are gathered into before they are
#: counted, checksummed and passed on to the sink (an upload buffers up to a part itself).
SINK_CHUNK = 1 << 20


class Sink(Protocol):
    """Where an encoded file's bytes go, in order (an `ObjectWriter`, a `BytesIO`)."""

    def write(self, data: bytes, /) -> int: ...


@dataclass(frozen=True)
class EncodedSlice:
    """A new base file as it was streamed to its sink: its size, checksum and footer, its
    smallest and largest record key, and the bloom filter of its keys (built a row group at
    a time as they were encoded; None when none was asked for)."""

    size: int
    checksum: str
    footer: pq.FileMetaData
    key_range: tuple[Any, Any]
    bloom: BloomFilter | None

    @property
    def rows(self) -> int:
        return int(self.footer.num_rows)


@dataclass(frozen=True)
class WrittenSlice:
    """A new base file in the store: its `DataFile`, key range and bloom filter."""

    file: DataFile
    key_range: tuple[Any, Any]
    bloom: BloomFilter | None

    @property
    def rows(self) -> int:
        return self.file.rows


class _Counted:
    """The file object the Parquet writer writes into: every piece goes on to `sink` and
    into the running CRC-32 and size, so the file is never held whole. Closing it closes
    nothing (the caller commits or aborts the upload).

    For a file joined with a finished one (timeline/parquet_splice.py), from `hold()` on what
    the writer writes (its footer) is kept here instead of passed on."""

    def __init__(self, sink: Sink) -> None:
        self._sink: Sink | None = sink
        self._held: bytearray | None = None
        self.crc = 0
        self.size = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        n = len(data)
        if self._held is not None:
            self._held += data
            return n
        self.put(data)
        return n

    def put(self, data: bytes | memoryview) -> None:
        """Pass `data` on to the sink, counted."""
        if self._sink is None:  # abandoned: the upload was aborted
            return
        self._sink.write(data)  # type: ignore[arg-type]  # the stores' writers take any buffer
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)

    def hold(self) -> None:
        """Keep what the writer writes from now on (see `held`)."""
        self._held = bytearray()

    def held(self) -> bytes:
        return bytes(self._held or b"")

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
    store: ObjectStore, base: DataFile, drop: set[int], schema: pa.Schema, rows_per_batch: int,
    body: bytes | None = None,
) -> Iterator[pa.Table]:  # fmt: skip
    """The rows of `base` that stay (positions in `drop` left out), in the table's schema,
    one row group decoded at a time. The file is fetched as keyed/write/base_stream.py says
    and checked against its recorded checksum, as every read of a committed file is, unless
    its verified bytes are given (`body`: kept from the locate step)."""
    groups = base_row_groups(store, base, body)
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


def new_rows(incoming: pa.Table, positions: np.ndarray, schema: pa.Schema,
             rows_per_batch: int, commit_time: str) -> Iterator[pa.Table]:  # fmt: skip
    """The batch rows at `positions`, in the table's schema, `rows_per_batch` at a time. Their
    commit-time column is made for each part, not taken: every new row carries the instant's
    time, and taking a column of one repeated string cost more than taking any other."""
    timed = COMMIT_TIME_COL in incoming.schema.names
    body = incoming.drop_columns([COMMIT_TIME_COL]) if timed else incoming
    positions = np.asarray(positions, dtype=np.int64)
    for i in range(0, len(positions), rows_per_batch):
        part = body.take(pa.array(positions[i : i + rows_per_batch], pa.int64()))
        if timed:
            times = pa.repeat(pa.scalar(commit_time, pa.string()), part.num_rows)
            part = part.add_column(0, COMMIT_TIME_COL, times)
        yield conform(part, schema)


#: Record keys up to this many bytes are ranged from the Parquet statistics the writer
#: computes anyway (Arrow's writer leaves a column chunk's min/max out when a value is longer
#: than 4096 bytes). A part holding a longer key is ranged as it passes.
STATS_KEY_BYTES = 1024


class _KeysSeen:
    """The row groups' record keys added to a filter as they are written, and the file's key
    range: from the key column's min/max statistics in the footer, which the Parquet writer
    computes as it encodes (a second pass over millions of key strings cost about a twentieth
    of a load's CPU), and as they pass for the keys statistics cannot hold."""

    def __init__(self, bloom: BloomBuilder | None) -> None:
        self._bloom = bloom
        self._lo: Any = None  # of the keys ranged as they passed
        self._hi: Any = None
        self._rows = 0

    def add(self, keys: pa.ChunkedArray, *, unstated: bool = False) -> None:
        """`keys` of row groups being written; `unstated`: their row groups (copied from
        another file) may carry no statistics of the key column, so they are ranged now."""
        if self._bloom is not None:
            self._bloom.add(keys)
        if unstated or _longest(keys) > STATS_KEY_BYTES:
            self._widen(*key_range(keys))
        self._rows += len(keys)

    def _widen(self, lo: Any, hi: Any) -> None:
        self._lo, self._hi = _wider((self._lo, self._hi), lo, hi)

    def range(self, footer: pq.FileMetaData) -> tuple[Any, Any]:
        """The key range of the file `footer` describes: its row groups' statistics of the
        key column and the keys ranged as they passed (the row groups without statistics)."""
        span = (self._lo, self._hi)
        for stats in _key_stats(footer):
            if stats is not None and stats.has_min_max:
                span = _wider(span, stats.min, stats.max)
        return span

    def finish(self) -> BloomFilter | None:
        return self._bloom.finish() if self._bloom is not None and self._rows else None


def _wider(span: tuple[Any, Any], lo: Any, hi: Any) -> tuple[Any, Any]:
    """`span` (lowest, highest; None: none yet) widened to hold `lo` and `hi`."""
    low, high = span
    if lo is not None and (low is None or lo < low):
        low = lo
    if hi is not None and (high is None or hi > high):
        high = hi
    return low, high


def _longest(keys: pa.ChunkedArray) -> int:
    """The byte length of the longest key (from the offsets: no key is read)."""
    longest = pc.max(pc.binary_length(keys)).as_py()
    return int(longest) if longest is not None else 0


def _key_stats(footer: pq.FileMetaData) -> Iterator[pq.Statistics | None]:
    """The statistics of the key column in each row group of a file."""
    if not footer.num_row_groups:
        return
    schema = footer.schema
    col = next(i for i in range(len(schema)) if schema.column(i).path == RECORD_KEY_COL)
    for i in range(footer.num_row_groups):
        yield footer.row_group(i).column(col).statistics


def _stated(footer: pq.FileMetaData) -> bool:
    """Whether every row group of a file carries min/max statistics of its key column."""
    return all(s is not None and s.has_min_max for s in _key_stats(footer))


class SliceEncoder:
    """One Parquet file encoded incrementally (zstd and small dictionaries, as
    `to_parquet_bytes`) into `sink`: parts are added as they come and gathered into full row
    groups of `rows_per_group` rows (the last may be shorter), so a file of kept and new rows,
    or of a stream's small batches, is not cut into small row groups. Each row group's record
    keys go into `bloom` as it is written; the key range is read from the footer
    (`_KeysSeen`)."""

    def __init__(
        self,
        schema: pa.Schema,
        rows_per_group: int,
        sink: Sink,
        bloom: BloomBuilder | None = None,
        *,
        lead: CopiedBase | None = None,
        codec: str = DEFAULT_CODEC,
    ) -> None:
        # `lead`: a finished file whose row groups go first, copied as they are. Its bytes
        # go through the writer's own file object, which counts the position the writer
        # takes its offsets from: its row groups then name where they land after the copy.
        self._out = _Counted(sink)
        # The Parquet writer writes page by page, from threads that do not hold the GIL:
        # a native buffer gathers its pages so Python (the count, the checksum, the sink)
        # is entered once per `SINK_CHUNK` bytes instead of a few times per page.
        self._file = pa.BufferedOutputStream(pa.PythonFile(self._out, mode="w"), SINK_CHUNK)
        # Of a copied file only its footer is kept once its row groups are passed on: the
        # encoder of a stream's file lives on while the stream runs.
        self._lead_footer: bytes | None = None
        self._schema = schema
        self._rows_per_group = rows_per_group
        self._writer = pq.ParquetWriter(
            self._file, schema, compression=codec, dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT
        )
        self._seen = _KeysSeen(bloom)
        self._pending: list[pa.Table] = []
        self.held = 0  # rows added but not encoded yet
        self.held_bytes = 0  # their Arrow bytes
        self.rows = 0  # rows added
        self.groups = 0  # row groups written
        if lead is not None:
            try:
                self._copy(lead)
            except BaseException:
                self.abandon()
                raise
            self._lead_footer = lead.footer_bytes

    def add(self, part: pa.Table) -> None:
        self._pending.append(part)
        self.held += part.num_rows
        self.held_bytes += part.nbytes
        self.rows += part.num_rows
        while self.held >= self._rows_per_group:
            self._flush(self._rows_per_group)

    def flush(self) -> None:
        """Encode the rows held as a row group now, however few (a writer holding too much
        across its open files frees some this way)."""
        if self.held:
            self._flush(self.held)

    def _flush(self, upto: int) -> None:
        t = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        done, rest = t.slice(0, upto), t.slice(upto)
        self._writer.write_table(done, row_group_size=self._rows_per_group)
        self._seen.add(done.column(RECORD_KEY_COL))
        self._pending, self.held = ([rest] if rest.num_rows else []), rest.num_rows
        self.held_bytes = rest.nbytes if rest.num_rows else 0
        self.groups += 1

    def _copy(self, f: CopiedBase) -> None:
        """Pass a copied file's row groups on as bytes, their record keys to the filter (and
        to the key range when its footer lacks their statistics)."""
        unstated = not _stated(f.footer)
        for piece, keys in f.pieces():
            self._file.write(piece)
            self._seen.add(keys, unstated=unstated)

    def finish(self) -> EncodedSlice:
        """Encode what is held and write the footer (an empty file still carries the
        schema; a file with a `lead` one footer for its row groups and the writer's)."""
        if self.held:
            self._flush(self.held)
        out = self._out
        if self._lead_footer is None:
            self._writer.close()
            self._file.flush()
            md = self._writer.writer.metadata
        else:
            self._file.flush()  # the row groups go on to the sink, the footer is held
            out.hold()
            self._writer.close()
            self._file.flush()
            md = self._join(self._lead_footer, out.held())
        return EncodedSlice(
            out.size, format_checksum(out.crc), md, self._seen.range(md), self._seen.finish()
        )

    def _join(self, lead: bytes, tail: bytes) -> pq.FileMetaData:
        """Write the end of a file led by the row groups of a copied file (`lead`: its
        footer): what the Parquet writer wrote at close before its footer, then one footer
        for all the row groups."""
        start = footer_start(MAGIC + tail) - len(MAGIC)
        self._out.put(tail[:start])
        footer, md = joined_footer(lead, tail[start:])
        self._out.put(footer)
        return md

    def abandon(self) -> None:
        """Close the Parquet writer without writing to the sink (its upload is aborted), so
        nothing writes into it later."""
        self._out.detach()
        self._pending.clear()
        self.held = self.held_bytes = 0
        self._writer.close()


def encode_slice(
    parts: Iterable[pa.Table],
    schema: pa.Schema,
    rows_per_group: int,
    sink: Sink,
    bloom: BloomBuilder | None = None,
    lead: CopiedBase | None = None,
    codec: str = DEFAULT_CODEC,
) -> EncodedSlice:
    """Encode `parts` into one Parquet file streamed to `sink` (see `SliceEncoder`), each row
    group's record keys into `bloom` as it is written: the file's keys are never held.
    `lead`: a finished file whose row groups go first, copied as bytes. `codec`: the new row
    groups' compression (pyarrow's name, `ParquetCodec.arrow`)."""
    enc = SliceEncoder(schema, rows_per_group, sink, bloom, lead=lead, codec=codec)
    try:
        for part in parts:
            enc.add(part)
        return enc.finish()
    except BaseException:
        enc.abandon()
        raise


def write_slice(
    store: ObjectStore, key: str, parts: Iterable[pa.Table], schema: pa.Schema,
    rows_per_group: int, partition: str, group: str, bloom: BloomBuilder | None = None,
    lead: CopiedBase | None = None, codec: str = DEFAULT_CODEC,
) -> WrittenSlice:  # fmt: skip
    """Encode `parts` (as `encode_slice`, its keys into `bloom`, after `lead`'s row groups)
    straight into a streaming upload of `key`, committed when the last row group and the
    footer are written (aborted, leaving nothing, if encoding fails)."""
    with store.open_writer(key) as upload:
        encoded = encode_slice(parts, schema, rows_per_group, upload, bloom, lead, codec)
    f = describe_footer(key, encoded.size, encoded.checksum, encoded.footer, partition, group)
    return WrittenSlice(f, encoded.key_range, encoded.bloom)


def slice_stats(
    store: ObjectStore,
    written: WrittenSlice,
    base: DataFile | None,
    counts: tuple[int, int, int],
    *,
    superset: BloomFilter | None = None,
) -> dict[str, Any]:
    """The write stats of a new slice (docs/tables.md, "Commit metadata"): the slice it
    supersedes, inserts/updates/deletes, rows, bytes, key range and bloom filter (the one
    built as it was written, else `superset`: a filter holding all of its keys)."""
    f = written.file
    inserts, updates, deletes = counts
    lo, hi = written.key_range
    bloom = written.bloom if written.bloom is not None else superset
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
        **(filter_ref(store, f.path, bloom) if written.rows and bloom else {"bloom": None}),
    }
