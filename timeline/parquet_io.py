"""Parquet bytes in and out of a table: writing pyarrow tables, checksums, reading snapshots.

Statistics come from the footer (file_stats.py); partition naming is in partitioning.py."""

from __future__ import annotations

import ctypes
import io
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq

from storage import IntegrityError, ObjectStore, checksum_of, verify

from .errors import InvalidDataFile, committed_object
from .metadata import DataFile
from .schema import conform


def local_parquet(path: str | os.PathLike[str]) -> pq.ParquetFile:
    """A local Parquet file to be written, opened; `InvalidDataFile` naming it if it is not
    Parquet (pyarrow's own message names no file)."""
    try:
        return pq.ParquetFile(path)
    except pa.ArrowInvalid as exc:
        raise InvalidDataFile(f"{path}: not a Parquet file ({exc})") from None


#: A column chunk's dictionary page at most (Arrow's default is 1 MiB). Past it Arrow falls
#: back to plain encoding for the rest of the chunk; a column of unique values (record keys,
#: names, ids) then pays for hashing up to 1 MiB of values into a dictionary it abandons, and
#: the file is larger than plain + zstd: measured on a 100k-row keyed slice (12 columns), the
#: 1 MiB limit wrote 3.6 MB in ~2x the encoding time of this one (2.3 MB), and decoding took
#: ~1.8x as long. Columns with a few thousand distinct short values (categories, partitions,
#: commit times) still fit and keep their dictionary.
DICTIONARY_PAGE_LIMIT = 64 * 1024

#: The data files' codec when none is given (pyarrow's name of the default
#: `TableSettings.parquet_compression_codec`).
DEFAULT_CODEC = "zstd"


def to_parquet_bytes(table: pa.Table, codec: str = DEFAULT_CODEC) -> bytes:
    """A table as Parquet: compressed by `codec` (pyarrow's name; a table's
    `TableSettings.parquet_compression_codec.arrow`), dictionaries only while they stay
    small."""
    buf = io.BytesIO()
    pq.write_table(table, buf, compression=codec, dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT)
    return buf.getvalue()


def footer_span(size: int, tail: bytes) -> tuple[int, int]:
    """(start, length) of a Parquet file's footer (metadata + length + magic) from the file's
    size and its last 8 or more bytes."""
    if size < 12 or len(tail) < 8 or tail[-4:] != b"PAR1":
        raise ValueError("not a Parquet file: no PAR1 magic at the end")
    length = int.from_bytes(tail[-8:-4], "little") + 8
    if length > size - 4:
        raise ValueError(f"Parquet footer length {length} exceeds the file size {size}")
    return size - length, length


def row_group_spans(md: pq.FileMetaData) -> list[tuple[int, int]]:
    """[start, end) of each row group's column chunks (contiguous in files we write)."""
    spans = []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        starts, ends = [], []
        for c in range(rg.num_columns):
            col = rg.column(c)
            start = col.data_page_offset
            if col.has_dictionary_page and col.dictionary_page_offset is not None:
                start = min(start, col.dictionary_page_offset)
            starts.append(start)
            ends.append(start + col.total_compressed_size)
        spans.append((min(starts), max(ends)))
    return spans


def checksummed(f: DataFile, body: bytes, *, ranged: bool = False) -> DataFile:
    """`f` with the checksum of its bytes; `ranged=True` adds the footer and row-group
    checksums a reader of byte ranges verifies (provenance event and index files)."""
    if not ranged:
        return replace(f, checksum=checksum_of(body))
    start, length = footer_span(len(body), body[-8:])
    md = pq.ParquetFile(io.BytesIO(body)).metadata
    return replace(
        f,
        checksum=checksum_of(body),
        footer_checksum=checksum_of(memoryview(body)[start : start + length]),
        row_group_checksums=tuple(
            checksum_of(memoryview(body)[s:e]) for s, e in row_group_spans(md)
        ),
    )


def read_verified(store: ObjectStore, f: DataFile) -> bytes:
    """The whole file, checked against the checksum its commit recorded (IntegrityError
    naming the object otherwise, `MissingTableObject` if it is gone; a legacy file without a
    checksum is read as is)."""
    where = store.url(f.path)
    with committed_object(where):
        data = store.get(f.path)
    if f.size and len(data) != f.size:
        raise IntegrityError(
            f"{where} is corrupt: {len(data)} bytes read, the commit recorded {f.size}", where
        )
    verify(data, f.checksum, where)
    return data


def _read_one(body: bytes, columns: Sequence[str] | None, schema: pa.Schema | None) -> pa.Table:
    """One file, decoded on the calling thread. Arrow's thread pools are never started: a
    worker still alive when the interpreter exits aborts the process ("terminate called without
    an active exception", apache/arrow#34314), and `pq.read_table` always starts them (it goes
    through the dataset scanner). Columns added after this file was written are left out here
    and come back as nulls in `conform`."""
    pf = pq.ParquetFile(pa.BufferReader(body))
    wanted = None
    if columns:
        present = set(pf.schema_arrow.names)
        wanted = [c for c in columns if c in present or schema is None]
    return pf.read(columns=wanted, use_threads=False)


def decode_file(
    body: bytes, columns: Sequence[str] | None = None, schema: pa.Schema | None = None
) -> pa.Table:
    """One verified file's rows (or some columns) from bytes already fetched, in the
    table's `schema` when given, as `read_files` decodes each file."""
    t = _read_one(body, columns, schema)
    return conform(t, schema, columns) if schema is not None else t


def read_files(
    store: ObjectStore,
    files: Sequence[DataFile],
    columns: Sequence[str] | None = None,
    schema: pa.Schema | None = None,
    *,
    parallelism: int = 1,
) -> pa.Table | None:
    """The files' rows, concatenated in the order given; `parallelism`: files fetched and
    decoded at once (object-store latency overlaps; a read of many small files is otherwise
    a sum of round trips)."""

    def one(f: DataFile) -> pa.Table:
        return _read_one(read_verified(store, f), columns, schema)

    if parallelism > 1 and len(files) > 1:
        with ThreadPoolExecutor(min(parallelism, len(files)), "flowledger-parquet-read") as pool:
            tables = list(pool.map(one, files))
    else:
        tables = [one(f) for f in files]
    if schema is not None:  # the table's schema: files written before an evolution conform
        tables = [conform(t, schema, columns) for t in tables]
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default")


#: Blocks of the C heap of this size or more are mapped on their own and unmapped when freed
#: (glibc's `M_MMAP_THRESHOLD`; see `return_large_blocks`).
MMAP_THRESHOLD = 1024 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def release_unused_memory() -> None:
    """Hand the freed pages of the process's allocators back to the operating system: Arrow's
    (mimalloc or jemalloc) and, on glibc, the C heap's (`malloc_trim`). Both keep what a
    large write freed, so without this a long-lived writer's footprint stays at its largest
    commit so far: measured after loading 2M rows, 454 MiB resident of which 235 MiB were
    freed Arrow pages. Costs about a millisecond."""
    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def return_large_blocks() -> None:
    """Have glibc map C-heap blocks of `MMAP_THRESHOLD` bytes or more on their own, so they
    go back to the operating system when freed (process-wide; not when the process set
    `MALLOC_MMAP_THRESHOLD_` itself). The C heap holds the bytes of fetched objects (Python
    `bytes`): glibc raises its threshold to the largest block freed (up to 32 MiB), after
    which blocks of the size of a table's files land in the heaps of the threads that
    fetched them, fragment them, and stay resident; the resident set then grew with the
    table's files. Measured on the upsert benchmark at 10M rows (local store): the resident
    set each step starts from 264-317 MiB with the dynamic threshold and a trim after each
    commit, 217-228 MiB with this one. It costs time: every block of 1 MiB or more (numpy
    temporaries too) is a fresh mapping whose pages fault in; at 8 MiB the benchmark's
    rewrites ran faster but peaked 60-140 MiB higher (docs/tables.md, "Memory")."""
    libc = _glibc()
    if libc is not None and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has `malloc_trim` and `mallopt`), else None
    (loaded already: opening it again costs microseconds)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):  # another C library (musl has no malloc_trim)
        return None
    return libc
