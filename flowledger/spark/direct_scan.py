"""A keyed write's input read straight from its Parquet files, not through Spark's rows.

Spark turns a DataFrame's rows into Arrow (`toArrow`, `mapInArrow`) at a cost that dominates
a keyed load: the rows were Parquet, pyarrow could have read them as Arrow directly. When the
DataFrame is a plain scan of Parquet files — its optimized logical plan (as `explain` prints
it: no job runs) a relation over Parquet files, at most under a projection of bare columns,
and no file under a `column=value` folder (a cached DataFrame's plan is its cache, which
names no files: Spark's rows) — the writer reads those files itself with pyarrow, in name
order, through flowledger's store (`s3a://` reaches the endpoint and credentials of the
session's s3a options, as the table does), and conforms each file to the plan's schema as
the table records it (`arrow.arrow_schema`: UTC timestamps, nullable).

Anything else takes the rows from Spark as before: a filter, a join, an expression, another
format, a file whose columns or types are not exactly what Spark would read from it (a
missing or differently spelled column, an INT96 or other timestamp Spark reinterprets, a
binary read as a string, ...) — `NotDirect` is raised by the reader when it meets such a
file, so a caller that already started falls back. `spark.flowledger.keyed.directRead=false`
turns the direct path off.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from storage import ObjectStore, StoreSettings, open_store

from .arrow import arrow_schema
from .conf import CONF_PREFIX
from .errors import NotDirect

DIRECT_CONF = CONF_PREFIX + "keyed.directRead"
log = logging.getLogger(__name__)

#: The optimized plan's nodes `explain` prints for a plain scan: a Parquet file relation under
#: at most a projection of bare columns (`name#id`; an expression or alias has spaces).
_PROJECT = re.compile(r"Project \[(.*)\]")
_COLUMN = re.compile(r"[^\s,()]+#\d+L?")
_RELATION = re.compile(r"Relation \[.*\] parquet")

#: Timestamp units a file may hold that widen to Spark's microseconds without loss.
_WIDENS = frozenset({"s", "ms", "us"})


@dataclass(frozen=True)
class ParquetScan:
    """The files a plain Parquet scan reads (as Spark names them, in name order) and the
    columns it yields, in the schema the table records."""

    files: tuple[str, ...]
    schema: pa.Schema


def direct_enabled(spark: Any) -> bool:
    return str(spark.conf.get(DIRECT_CONF, "true")).strip().lower() != "false"


def optimized_plan(df: Any) -> list[str]:
    """The lines of `df`'s optimized logical plan as `explain` prints it (no job runs)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="extended")
    section = out.getvalue().partition("== Optimized Logical Plan ==")[2]
    section = section.partition("== Physical Plan ==")[0]
    return [line.strip() for line in section.splitlines() if line.strip()]


def plain_relation(lines: list[str]) -> bool:
    """Whether plan `lines` are a Parquet file relation, at most under a projection of its
    own columns."""
    if not lines or any(not line.startswith("+- ") for line in lines[1:]):
        return False  # empty, or not a chain of single children
    nodes = [lines[0]] + [line[3:] for line in lines[1:]]
    if (project := _PROJECT.fullmatch(nodes[0])) is not None:
        if not all(_COLUMN.fullmatch(c.strip()) for c in project.group(1).split(",")):
            return False
        nodes = nodes[1:]
    return len(nodes) == 1 and bool(_RELATION.fullmatch(nodes[0]))


def _partitioned(files: tuple[str, ...], columns: list[str]) -> bool:
    """Whether a file's path names a value of one of `columns` (`col=value`): a column
    Spark takes from the directory, not from the file."""
    names = {c.lower() for c in columns}
    for f in files:
        for segment in unquote(urlparse(f).path).split("/")[:-1]:
            if "=" in segment and segment.split("=", 1)[0].lower() in names:
                return True
    return False


def parquet_scan(df: Any) -> ParquetScan | None:
    """The files `df` reads, when it is a plain Parquet scan whose files flowledger's store
    can open (local, `s3a://`, `s3://`) and the direct path is on; else None."""
    try:
        if not direct_enabled(df.sparkSession) or not plain_relation(optimized_plan(df)):
            return None
        files = tuple(sorted(str(f) for f in df.inputFiles()))
    except Exception:  # a plan this Spark cannot explain or list
        return None
    if not files or any(urlparse(f).scheme not in ("file", "s3a", "s3") for f in files):
        return None
    if _partitioned(files, list(df.columns)):
        return None
    return ParquetScan(files, arrow_schema(df.schema))


def _conformed_type(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a file column of type `have` holds what Spark reads as `want` (cast without
    loss or reinterpretation)."""
    if have == want:
        return True
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        # An instant stays an instant (any zone: the values are UTC), a local time stays local.
        return (have.tz is None) == (want.tz is None) and have.unit in _WIDENS
    strings = (pa.string(), pa.large_string())
    binaries = (pa.binary(), pa.large_binary())
    return (have in strings and want in strings) or (have in binaries and want in binaries)


def _check(uri: str, file_schema: pa.Schema, want: pa.Schema) -> None:
    for field in want:
        idx = file_schema.get_all_field_indices(field.name)
        if len(idx) != 1:
            raise NotDirect(f"{uri}: column {field.name!r} not found once")
        have = file_schema.field(idx[0]).type
        if not _conformed_type(have, field.type):
            raise NotDirect(f"{uri}: column {field.name!r} is {have}, Spark reads {field.type}")


def _open(uri: str, store: StoreSettings, buckets: dict[str, ObjectStore]) -> pq.ParquetFile:
    """The input file: a local file opened in place, an object read whole (one GET) through
    its bucket's store in `buckets` (opened on first use: one client per bucket, not per
    file)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return pq.ParquetFile(unquote(parsed.path))
    key = unquote(parsed.path).lstrip("/")
    obj = buckets.get(parsed.netloc)
    if obj is None:
        obj = buckets[parsed.netloc] = open_store(f"s3://{parsed.netloc}", store)
    return pq.ParquetFile(pa.BufferReader(obj.get(key)))


def read_scan(scan: ParquetScan, store: StoreSettings) -> Iterator[pa.RecordBatch]:
    """The scan's rows, file by file (in name order) and row group by row group, in the
    plan's schema; `NotDirect` before the first row of a file that does not conform."""
    want = scan.schema
    buckets: dict[str, ObjectStore] = {}
    try:
        for uri in scan.files:
            pf = _open(uri, store, buckets)
            _check(uri, pf.schema_arrow, want)
            for i in range(pf.num_row_groups):
                rows = pf.read_row_group(i, columns=want.names)
                yield from rows.select(want.names).cast(want).to_batches()
    finally:  # the stream read or abandoned: the buckets' clients and their sockets closed
        for obj in buckets.values():
            obj.close()


def read_scan_table(scan: ParquetScan, store: StoreSettings) -> pa.Table:
    """The scan's rows as one table (empty in the plan's schema when the files hold none)."""
    return pa.Table.from_batches(list(read_scan(scan, store)), scan.schema)


__all__ = [
    "DIRECT_CONF",
    "NotDirect",
    "ParquetScan",
    "direct_enabled",
    "parquet_scan",
    "read_scan",
    "read_scan_table",
]
