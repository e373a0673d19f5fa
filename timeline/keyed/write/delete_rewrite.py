"""Deletes by key on a copy-on-write table: each candidate file matched, then rewritten.

A delete leaves every row it keeps unchanged, so it needs none of an upsert's placement.
One task per candidate file matches its record keys against the deleted ones
(`pyarrow.compute.is_in`), applies the merge mode's delete rule, and, when some row goes,
streams the kept rows (a row group at a time) into the new slice. A small file is fetched
and verified once and rewritten from the bytes it holds; a file of 16 MiB or more is
matched by ranged GETs of its key (and ordering) chunks (keyed/write/key_chunks.py) and,
when some row goes, streamed again for its rewrite (keyed/write/base_stream.py, which
verifies its checksum), so what a task holds does not grow with the file. At most
`write_parallelism` files are in flight at once, as in every copy-on-write rewrite.

A key stored in two files (two writers inserted it concurrently into new file groups) is
deleted from both: a delete removes the record wherever it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...metadata import DataFile
from ...parquet_io import read_verified
from ..index import BloomBuilder
from ..inflight import bounded_map
from ..keys import RECORD_KEY_COL
from ..merge import wins
from .base_stream import base_row_groups, held_bytes, ranged, row_groups_of
from .key_chunks import Matches, matching_rows, whole_matches
from .planner import Batch, Planner
from .slice_writer import SliceOut, kept_rows, slice_stats, write_slice


@dataclass(frozen=True)
class DeletedSlice:
    """One file group's new slice after a delete, and the records it removed."""

    file: DataFile
    stats: dict[str, Any]
    keys: pa.Array  # record keys removed (for the record-level index)
    partition: str


def _deleted_rows(
    m: Matches, plan: Planner, keys: pa.Array, ordering: pa.Array | None
) -> tuple[np.ndarray, pa.Array]:
    """Of a file's rows whose record key is among `keys` (`m`), those whose delete wins (the
    merge mode's rule against the stored ordering value), ascending, and their keys."""
    rows, data = m.rows, m.data
    if data is None:
        return rows, pa.array([], pa.string())
    stored = data.column(RECORD_KEY_COL)
    if ordering is None or plan.props.ordering_field is None:
        return rows, stored.combine_chunks()
    order_col = plan.props.ordering_field
    if order_col in data.column_names:
        stored_order = data.column(order_col)
    else:
        stored_order = pa.chunked_array([pa.nulls(len(rows), ordering.type)])
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
    cols = [RECORD_KEY_COL]
    if ordering is not None and plan.props.ordering_field is not None:
        cols.append(plan.props.ordering_field)
    body = None if ranged(f) else read_verified(store, f)
    if body is None:  # a big file: its key chunks first, then streamed if a row goes
        m = matching_rows(store, f, cols, keys)
    else:
        m = whole_matches(pq.ParquetFile(pa.BufferReader(body)), cols, keys)
    gone, removed_keys = _deleted_rows(m, plan, keys, ordering)
    if not len(gone):
        return None
    if body is None:
        groups = base_row_groups(store, f)
    else:
        groups = row_groups_of(pq.ParquetFile(pa.BufferReader(body)))
    keep = np.ones(f.rows, dtype=bool)
    keep[gone] = False
    settings = plan.table.settings
    n = settings.parquet_row_group_rows
    key = out.slice_key(f.partition, f.group)
    # The kept keys are a subset of the old file's: its filter, when the index holds it,
    # serves the new slice as it is (no key hashed again).
    known = plan.known_filter(f)
    bloom = BloomBuilder(f.rows - len(gone), plan.bloom_fpp) if known is None else None
    written = write_slice(store, key, kept_rows(groups, keep, schema, n), schema, n,
                          f.partition, f.group, bloom,
                          codec=settings.parquet_compression_codec.arrow)  # fmt: skip
    stats = slice_stats(store, written, f, (0, 0, len(gone)), superset=known)
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
        cost=lambda probe: held_bytes(plan.files[probe[0]]),
    )
    deleted = sorted((d for d in done if d is not None), key=lambda d: d.file.group)
    keys = [d.keys for d in deleted]
    parts = [pa.repeat(pa.scalar(d.partition, pa.string()), len(d.keys)) for d in deleted]
    gone = (
        pa.concat_arrays(keys) if keys else pa.array([], pa.string()),
        pa.concat_arrays(parts) if parts else pa.array([], pa.string()),
    )
    return [(d.file, d.stats) for d in deleted], gone
