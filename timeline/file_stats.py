"""Row counts and column statistics of a Parquet data file, from its footer only.

Every writer records the same statistics for the same data, whoever wrote the file (timeline's
own writer, a Spark task, Spark's JVM writer): they come from the Parquet footer through
`footer_stats`, never from a writer's own pass over the rows. The footer is read from the
bytes a writer holds (`parquet_metadata`) or with one ranged GET of the file's tail
(`read_footer`, rarely two), never the data pages.

Canonical JSON of a statistic (what `stat_value` returns; docs/timeline-protocol.md, "Column
statistics"):

- bool, int, float, str: as they are (NaN is never a min or max: Parquet writers leave it out);
- bytes (binary, fixed-size binary, UUID): lowercase hex;
- decimals: the decimal's text with its scale (`"10.50"`); row groups are merged comparing the
  decimals, never their text;
- dates and times: ISO 8601; timestamps with a time zone: ISO 8601 in UTC
  (`2026-01-01T10:00:00+00:00`, whatever zone the column names), without one: ISO 8601 with no
  offset.

A column whose min/max is unknown in some row group that has non-null values (no statistics,
a value too long for the writer to record, INT96 timestamps) gets no min/max at all: a partial
range would be wrong; likewise `nulls` is left out when a row group does not count them. A row
group whose values are all null adds to `nulls` only. Nested columns get no statistics (only
top-level columns are recorded).
"""

from __future__ import annotations

import io
import zlib
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from storage import ObjectStore, checksum_of
from storage.checksum import format_checksum

from .metadata import DataFile
from .parquet_io import footer_span

#: Bytes of a file's tail fetched first: most footers fit, so one request per file.
FOOTER_TAIL = 64 * 1024
#: Bytes read per chunk when a stored file is checksummed.
CHECKSUM_CHUNK = 1 << 20

ColumnStats = dict[str, dict[str, Any]]


def stat_value(v: Any) -> Any:
    """The canonical JSON form of one statistic value (see the module docstring)."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            return v.astimezone(UTC).isoformat()
        return v.isoformat()
    if isinstance(v, date | time):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()
    return str(v)


def _comparable(v: Any) -> Any:
    """A value `min`/`max` can order: aware datetimes in UTC (zones compare fine, but a naive
    one never mixes with them), everything else as it is."""
    return v.astimezone(UTC) if isinstance(v, datetime) and v.tzinfo is not None else v


def parquet_metadata(body: bytes | bytearray | memoryview) -> pq.FileMetaData:
    """The footer of a Parquet file held in memory (only the footer is parsed)."""
    return pq.ParquetFile(pa.BufferReader(body)).metadata


def read_footer(store: ObjectStore, key: str, size: int) -> pq.FileMetaData:
    """The footer of a stored Parquet file of `size` bytes: one ranged GET of its tail, a
    second one when the footer is longer than `FOOTER_TAIL`."""
    start = max(0, size - FOOTER_TAIL)
    tail = store.get(key, start, size - start)
    try:
        begin, length = footer_span(size, tail)
    except ValueError as exc:
        raise ValueError(f"{store.url(key)}: {exc}") from exc
    if length > len(tail):
        tail = store.get(key, begin, length)
    return pq.read_metadata(io.BytesIO(b"PAR1" + tail[-length:]))


def footer_stats(md: pq.FileMetaData) -> ColumnStats:
    """Column statistics (`{"nulls": n, "min": v, "max": v}`, canonical JSON values) of a
    Parquet file from its footer: the one function every writer records them with."""
    top_level = {
        i: md.schema.column(i).path
        for i in range(md.num_columns)
        if "." not in md.schema.column(i).path
    }
    nulls = dict.fromkeys(top_level.values(), 0)
    unknown_nulls: set[str] = set()
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    partial: set[str] = set()  # min/max unknown in a row group holding values
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        for i, name in top_level.items():
            try:
                st = group.column(i).statistics
            except _UNCONVERTIBLE:
                st = None
            if st is None:
                if _is_null_type(md, i):  # Arrow's null type: no statistics, all null
                    nulls[name] += group.num_rows
                else:
                    unknown_nulls.add(name)
                    partial.add(name)
                continue
            if st.has_null_count:
                nulls[name] += int(st.null_count)
            else:
                unknown_nulls.add(name)
            try:
                lo, hi = (st.min, st.max) if st.has_min_max else (None, None)
                known = st.has_min_max
            except _UNCONVERTIBLE:  # e.g. INT96 timestamps
                known = False
            if not known:
                if not st.has_null_count or st.null_count < group.num_rows:
                    partial.add(name)  # values exist, their range is unknown
                continue
            lo, hi = _comparable(lo), _comparable(hi)
            try:
                lows[name] = lo if name not in lows else min(lows[name], lo)
                highs[name] = hi if name not in highs else max(highs[name], hi)
            except TypeError:
                partial.add(name)
    out: ColumnStats = {}
    for name in top_level.values():
        entry: dict[str, Any] = {} if name in unknown_nulls else {"nulls": nulls[name]}
        if name not in partial and name in lows:
            entry["min"], entry["max"] = stat_value(lows[name]), stat_value(highs[name])
        out[name] = entry
    return out


_UNCONVERTIBLE = (ValueError, TypeError, NotImplementedError, pa.ArrowException)


def _is_null_type(md: pq.FileMetaData, i: int) -> bool:
    return str(md.schema.column(i).logical_type) == "Null"


def describe_bytes(key: str, body: bytes, partition: str = "", file_group: str = "") -> DataFile:
    """The `DataFile` of a Parquet file a writer holds in memory: size, rows and statistics
    from its footer, and the checksum of its bytes."""
    return describe_footer(
        key, len(body), checksum_of(body), parquet_metadata(body), partition, file_group
    )


def describe_footer(
    key: str,
    size: int,
    checksum: str,
    md: pq.FileMetaData,
    partition: str = "",
    file_group: str = "",
) -> DataFile:
    """The `DataFile` of a Parquet file streamed to the store: `size` bytes with `checksum`,
    rows and statistics from the footer `md` its writer produced (the same footer a reader
    parses, so the statistics are those `describe_bytes` gives for the same bytes)."""
    return DataFile(
        key, size, md.num_rows, partition, file_group,
        column_stats=footer_stats(md), checksum=checksum,
    )  # fmt: skip


def stored_checksum(store: ObjectStore, key: str) -> str:
    """`crc32:XXXXXXXX` of a stored object, streamed (never held in memory whole)."""
    crc = 0
    with store.open_read(key) as body:
        while chunk := body.read(CHECKSUM_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return format_checksum(crc)


def describe_stored(
    store: ObjectStore,
    key: str,
    size: int,
    partition: str = "",
    file_group: str = "",
    *,
    checksum: bool = True,
) -> DataFile:
    """The `DataFile` of a Parquet file already in the store (an engine wrote it): rows and
    statistics from its footer; with `checksum`, every byte is read back once for its crc32
    (readers verify it; without it the file is read unverified)."""
    md = read_footer(store, key, size)
    return DataFile(
        key,
        size,
        md.num_rows,
        partition,
        file_group,
        column_stats=footer_stats(md),
        checksum=stored_checksum(store, key) if checksum else "",
    )


def rows_and_stats(body: bytes) -> tuple[int, ColumnStats]:
    """Row count and column statistics of a Parquet file's bytes (footer only)."""
    md = parquet_metadata(body)
    return md.num_rows, footer_stats(md)
