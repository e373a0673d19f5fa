"""Deletes by key on a copy-on-write table: each candidate file fetched and decoded once.

A delete leaves every row it keeps unchanged, so it needs none of an upsert's placement.
Finding the records first (the key column of every file the index names) and then rewriting
each file that holds one fetches and checksums every such file twice; keys spread over the
table make that the whole table, twice. Here one task per candidate file GETs and verifies
it once, matches its record keys against the deleted ones (`pyarrow.compute.is_in`), applies
the merge mode's delete rule, and, when some row goes, streams the kept rows (a row group at
a time) into the new slice from the bytes it already holds. At most `write_parallelism`
files are held at once, as in every copy-on-write rewrite.

A key stored in two files (two writers inserted it concurrently into new file groups) is
deleted from both: a delete removes the record wherever it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...metadata import DataFile
from ...parquet_io import read_verified
from ..inflight import bounded_map
from ..keys import RECORD_KEY_COL
from ..merge import wins
from .base_stream import row_groups_of
from .planner import Batch, Planner
from .slice_writer import SliceOut, kept_rows, slice_stats, write_slice


@dataclass(frozen=True)
class DeletedSlice:
    """One file group's new slice after a delete, and the records it removed."""

    file: DataFile
    stats: dict[str, Any]
    keys: pa.Array  # record keys removed (for the record-level index)
    partition: str


def _matches(
    pf: pq.ParquetFile, cols: list[str], keys: pa.Array
) -> tuple[np.ndarray, pa.Table | None]:
    """Positions (ascending) and `cols` values of the open file's rows whose record key is
    among `keys`, read a row group at a time: what is held is sized by the matches."""
    rows: list[np.ndarray] = []
    found: list[pa.Table] = []
    start = 0
    for i in range(pf.num_row_groups):
        data = pf.read_row_group(i, columns=cols, use_threads=False)
        hit = pc.indices_nonzero(pc.is_in(data.column(RECORD_KEY_COL), value_set=keys))
        if len(hit):
            rows.append(np.asarray(hit.to_numpy(), dtype=np.int64) + start)
            found.append(data.take(hit))
        start += data.num_rows
    if not found:
        return np.empty(0, dtype=np.int64), None
    return np.concatenate(rows), pa.concat_tables(found)


def _deleted_rows(
    pf: pq.ParquetFile, plan: Planner, keys: pa.Array, ordering: pa.Array | None
) -> tuple[np.ndarray, pa.Array]:
    """Rows of the open file whose record key is among `keys` and whose delete wins (the
    merge mode's rule against the stored ordering value), ascending, and their keys."""
    order_col = plan.props.ordering_field
    present = pf.schema_arrow.names
    with_order = ordering is not None and order_col is not None
    cols = [RECORD_KEY_COL]
    if with_order and order_col in present:
        cols.append(str(order_col))
    rows, data = _matches(pf, cols, keys)
    if data is None:
        return rows, pa.array([], pa.string())
    stored = data.column(RECORD_KEY_COL)
    if not with_order or ordering is None:
        return rows, stored.combine_chunks()
    stored_order = data.column(1) if len(cols) > 1 else pa.nulls(len(rows), ordering.type)
    got = pa.table({"key": stored, "row": pa.array(rows, pa.int64()), "stored": stored_order})
    j = got.join(pa.table({"key": keys, "incoming": ordering}), "key", join_type="inner")
    won = wins(
        j.column("stored").combine_chunks(), j.column("incoming").combine_chunks(), plan.props, True
    )
    gone = j.filter(pa.array(won)).sort_by("row")
    return gone.column("row").to_numpy(), gone.column("key").combine_chunks()


def _rewrite(
    out: SliceOut,
    plan: Planner,
    f: DataFile,
    keys: pa.Array,
    ordering: pa.Array | None,
    schema: pa.Schema,
) -> DeletedSlice | None:
    store = plan.table.store
    pf = pq.ParquetFile(pa.BufferReader(read_verified(store, f)))
    gone, removed_keys = _deleted_rows(pf, plan, keys, ordering)
    if not len(gone):
        return None
    keep = np.ones(pf.metadata.num_rows, dtype=bool)
    keep[gone] = False
    n = plan.table.settings.parquet_row_group_rows
    key = out.slice_key(f.partition, f.group)
    written = write_slice(store, key, kept_rows(row_groups_of(pf), keep, schema, n), schema, n,
                          f.partition, f.group)  # fmt: skip
    # The kept keys are a subset of the old file's: its filter, when the index holds it,
    # serves the new slice as it is (no key hashed again).
    stats = slice_stats(
        store, written, f, (0, 0, len(gone)), plan.bloom_fpp, superset=plan.known_filter(f)
    )
    return DeletedSlice(written.file, stats, removed_keys.cast(pa.string()), f.partition)


def delete_by_keys(
    out: SliceOut, plan: Planner, dbatch: Batch
) -> tuple[list[tuple[DataFile, dict[str, Any]]], tuple[pa.Array, pa.Array]]:
    """Rewrite every candidate file of `dbatch`'s keys that holds one whose delete wins:
    (new slice, write stats) in file-group order, and the removed records' (keys,
    partitions) for the record-level index."""
    probes = plan.candidates(dbatch)
    plan.files_read += len(probes)
    has_order = dbatch.ordering is not None

    def one(probe: tuple[int, np.ndarray]) -> DeletedSlice | None:
        k, pos = probe
        idx = pa.array(pos, pa.int64())
        ordering = dbatch.ordering.take(idx) if has_order and dbatch.ordering is not None else None
        return _rewrite(out, plan, plan.files[k], dbatch.keys.take(idx), ordering, out.schema)

    s = plan.table.settings
    done: Sequence[DeletedSlice | None] = bounded_map(
        one,
        probes,
        workers=s.write_parallelism,
        budget=s.write_inflight_bytes,
        cost=lambda probe: plan.files[probe[0]].size,
    )
    deleted = sorted((d for d in done if d is not None), key=lambda d: d.file.group)
    keys = [d.keys for d in deleted]
    parts = [pa.repeat(pa.scalar(d.partition, pa.string()), len(d.keys)) for d in deleted]
    gone = (
        pa.concat_arrays(keys) if keys else pa.array([], pa.string()),
        pa.concat_arrays(parts) if parts else pa.array([], pa.string()),
    )
    return [(d.file, d.stats) for d in deleted], gone
