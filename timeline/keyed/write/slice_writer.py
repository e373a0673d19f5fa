"""A file group's new base file written a row group at a time.

A copy-on-write rewrite keeps most of its base file's rows. Decoding the whole base file,
filtering it and concatenating the new rows holds several copies of the file's rows at
once, so a writer's memory grew with the size of its files (and the table). Here the base
file's rows are decoded one row group (at most `parquet_row_group_rows`) at a time, filtered
and encoded straight into the new file: the writer holds the base file's bytes, the new
file's bytes and one row group decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage import ObjectStore

from ...layout import data_instant_time
from ...metadata import DataFile
from ...parquet_io import DICTIONARY_PAGE_LIMIT, read_verified
from ...schema import conform
from ..index import BloomFilter, bloom_ref
from ..keys import RECORD_KEY_COL, key_range


@dataclass(frozen=True)
class WrittenSlice:
    """A new base file's bytes, with what its write stats describe."""

    body: bytes
    rows: int
    keys: pa.ChunkedArray  # its record keys, for the bloom filter and the key range


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
    at most `rows_per_batch` decoded at a time. The file is checked against its recorded
    checksum first, as every read of a committed file is (`body`: its bytes, already
    fetched and checked)."""
    if body is None:
        body = read_verified(store, base)
    pf = pq.ParquetFile(pa.BufferReader(body))
    keep: np.ndarray | None = None
    if drop:
        keep = np.ones(pf.metadata.num_rows, dtype=bool)
        keep[np.fromiter(drop, dtype=np.int64, count=len(drop))] = False
    return kept_rows(pf, keep, schema, rows_per_batch)


def kept_rows(
    pf: pq.ParquetFile, keep: np.ndarray | None, schema: pa.Schema, rows_per_batch: int
) -> Iterator[pa.Table]:
    """The rows of an open (verified) base file where `keep` is True (all when None), in the
    table's schema, at most `rows_per_batch` decoded at a time."""
    start = 0
    # use_threads=False: Arrow's pools are never started here (see parquet_io._read_one).
    for batch in pf.iter_batches(batch_size=rows_per_batch, use_threads=False):
        part = pa.Table.from_batches([batch])
        n = part.num_rows
        if keep is not None:
            part = part.filter(pa.array(keep[start : start + n]))
        start += n
        if part.num_rows:
            yield conform(part, schema)


def new_rows(incoming: pa.Table, positions: list[int], schema: pa.Schema,
             rows_per_batch: int) -> Iterator[pa.Table]:  # fmt: skip
    """The batch rows at `positions`, in the table's schema, `rows_per_batch` at a time."""
    for i in range(0, len(positions), rows_per_batch):
        take = pa.array(positions[i : i + rows_per_batch], pa.int64())
        yield conform(incoming.take(take), schema)


def encode_slice(parts: Iterable[pa.Table], schema: pa.Schema, rows_per_group: int) -> WrittenSlice:
    """Encode `parts` into one Parquet file (zstd and small dictionaries, as
    `to_parquet_bytes`) of full row groups of `rows_per_group`
    rows but the last: small parts are gathered first, so a file of kept and new rows is not
    cut into small row groups. An empty file still carries the schema."""
    sink = pa.BufferOutputStream()
    keys: list[pa.Array] = []
    rows = 0
    pending: list[pa.Table] = []
    held = 0
    with pq.ParquetWriter(
        sink, schema, compression="zstd", dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT
    ) as w:

        def flush(upto: int) -> None:
            nonlocal pending, held, rows
            t = pa.concat_tables(pending) if len(pending) > 1 else pending[0]
            out, rest = t.slice(0, upto), t.slice(upto)
            w.write_table(out, row_group_size=rows_per_group)
            keys.extend(out.column(RECORD_KEY_COL).chunks)
            rows += out.num_rows
            pending, held = ([rest] if rest.num_rows else []), rest.num_rows

        for part in parts:
            pending.append(part)
            held += part.num_rows
            while held >= rows_per_group:
                flush(rows_per_group)
        if held:
            flush(held)
    key_type = schema.field(RECORD_KEY_COL).type
    return WrittenSlice(sink.getvalue().to_pybytes(), rows, pa.chunked_array(keys, key_type))


def slice_stats(
    store: ObjectStore,
    f: DataFile,
    written: WrittenSlice,
    base: DataFile | None,
    counts: tuple[int, int, int],
    fpp: float,
    *,
    superset: BloomFilter | None = None,
) -> dict[str, Any]:
    """The write stats of new slice `f` (docs/tables.md, "Commit metadata"): the slice it
    supersedes, inserts/updates/deletes, rows, bytes, key range and bloom filter
    (`superset`: a filter holding all of its keys, kept instead of building one)."""
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
