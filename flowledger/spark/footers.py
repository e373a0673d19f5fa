"""Row counts and column statistics of written Parquet files, from their footers only.

The native path commits files Spark's JVM wrote; the driver learns their row counts and
min/max/null statistics by reading each file's footer (one ranged GET of the tail, rarely two),
many files in parallel, never the data pages.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq

from storage import ObjectInfo, ObjectStore

TAIL = 64 * 1024  # most footers fit: one request per file
PARALLELISM = 16


@dataclass(frozen=True)
class FileFacts:
    key: str
    size: int
    rows: int
    column_stats: dict[str, dict[str, Any]]


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, datetime | date | time):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return v.hex()
    return str(v)


def _stats(md: pq.FileMetaData) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        for c in range(group.num_columns):
            col = group.column(c)
            name = col.path_in_schema
            if "." in name:  # nested leaf: top-level columns only, as timeline does
                continue
            st = col.statistics
            entry = out.setdefault(name, {"nulls": 0})
            if st is None:
                entry["_partial"] = True
                continue
            if st.has_null_count:
                entry["nulls"] += int(st.null_count)
            if not st.has_min_max:
                entry["_partial"] = True
                continue
            lo, hi = _jsonable(st.min), _jsonable(st.max)
            try:
                entry["min"] = lo if "min" not in entry else min(entry["min"], lo)
                entry["max"] = hi if "max" not in entry else max(entry["max"], hi)
            except TypeError:
                entry["_partial"] = True
    for entry in out.values():
        if entry.pop("_partial", False):  # min/max unknown for some row group: drop them
            entry.pop("min", None)
            entry.pop("max", None)
    return out


def read_footer(store: ObjectStore, key: str, size: int) -> pq.FileMetaData:
    start = max(0, size - TAIL)
    tail = store.get(key, start, size - start)
    (footer_len,) = struct.unpack("<I", tail[-8:-4])
    if tail[-4:] != b"PAR1":
        raise ValueError(f"{key} is not a Parquet file (no PAR1 magic at its end)")
    if footer_len + 8 > len(tail):
        start = size - footer_len - 8
        tail = store.get(key, start, footer_len + 8)
    return pq.read_metadata(io.BytesIO(b"PAR1" + tail[-(footer_len + 8) :]))


def describe(store: ObjectStore, files: Sequence[ObjectInfo]) -> list[FileFacts]:
    """Footer facts of `files`, in their order, read in parallel."""

    def one(info: ObjectInfo) -> FileFacts:
        md = read_footer(store, info.key, info.size)
        return FileFacts(info.key, info.size, md.num_rows, _stats(md))

    if len(files) <= 1:
        return [one(f) for f in files]
    with ThreadPoolExecutor(min(PARALLELISM, len(files))) as pool:
        return list(pool.map(one, files))
