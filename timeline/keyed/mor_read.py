"""Reading merge-on-read slices: a base file merged with its log blocks.

The merge is the table's merge mode, applied here (log_merge.py): blocks in completion
order, each entry by the rule its log file records, one file group at a time. Every object
of a read (base
files and logs) is fetched once, through one bounded pool the reader owns, so a slice's logs
are fetched concurrently with each other and with other slices' objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa

from storage import ObjectStore

from ..metadata import DataFile
from ..parquet_io import read_files
from ..schema import conform
from .keys import RECORD_KEY_COL
from .log_merge import Rule, merge
from .logfile import OP_COL, LogFile, read_log
from .slices import MorSlice

#: Objects (base files and logs) one snapshot read fetches at once (GETs in flight).
READ_PARALLELISM = 8


def _projection(columns: Sequence[str] | None, sl: MorSlice) -> list[str] | None:
    """The columns a slice read fetches: the record key and the ordering column its logs
    merge by, whatever `columns` says."""
    if columns is None:
        return None
    need = [RECORD_KEY_COL, *sorted({lf.merge_by for _, lf in sl.logs if lf.merge_by})]
    return list(columns) + [c for c in need if c not in columns]


def _rules(sl: MorSlice) -> list[Rule]:
    return [Rule(lf.merge_by, lf.ordered_deletes) for _, lf in sl.logs]


def _log_rows(
    store: ObjectStore, lf: LogFile, schema: pa.Schema | None, wanted: list[str] | None
) -> pa.Table:
    rows = read_log(store, lf)
    ops = rows.column(OP_COL)
    body = rows.drop_columns([OP_COL])
    body = conform(body, schema, wanted) if schema is not None else body
    if wanted is not None:
        body = body.select([c for c in wanted if c in body.column_names])
    return body.append_column(OP_COL, ops)


def _base_rows(
    store: ObjectStore, f: DataFile, schema: pa.Schema | None, wanted: list[str] | None
) -> pa.Table:
    base = read_files(store, [f], wanted, schema)
    return base if base is not None else pa.table({})


def _finish(merged: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    if columns is None:
        return merged
    extra = [c for c in merged.column_names if c not in columns]
    return merged.drop_columns(extra) if extra else merged


class SliceReader:
    """Reads merged slices with a bounded pool of fetches (base files and logs alike)."""

    def __init__(
        self,
        store: ObjectStore,
        schema: pa.Schema | None,
        columns: Sequence[str] | None = None,
        parallelism: int = READ_PARALLELISM,
    ) -> None:
        self.store = store
        self.schema = schema
        self.columns = columns
        self.parallelism = max(1, parallelism)

    def read(self, slices: Sequence[MorSlice]) -> list[pa.Table]:
        """Each slice's merged rows, in the order given. Every fetch is queued at once; a
        slice is merged as soon as its own objects are in, and they are then let go."""
        objects = sum(1 + len(sl.logs) for sl in slices)
        if objects <= 1 or self.parallelism == 1:
            out = []
            for sl in slices:
                w = _projection(self.columns, sl)
                base = _base_rows(self.store, sl.base, self.schema, w)
                logs = [_log_rows(self.store, lf, self.schema, w) for _, lf in sl.logs]
                out.append(_finish(merge(base, logs, _rules(sl)), self.columns))
            return out
        with ThreadPoolExecutor(min(self.parallelism, objects)) as pool:
            queued = [self._queue(pool, sl) for sl in slices]
            out = []
            for sl, parts in zip(slices, queued, strict=True):
                base, *logs = (fut.result() for fut in parts)
                out.append(_finish(merge(base, logs, _rules(sl)), self.columns))
            return out

    def _queue(self, pool: ThreadPoolExecutor, sl: MorSlice) -> list[Future[pa.Table]]:
        s, w = self.schema, _projection(self.columns, sl)
        futs = [pool.submit(_base_rows, self.store, sl.base, s, w)]
        futs += [pool.submit(_log_rows, self.store, lf, s, w) for _, lf in sl.logs]
        return futs


def read_slice(
    store: ObjectStore,
    sl: MorSlice,
    schema: pa.Schema | None,
    columns: Sequence[str] | None = None,
    *,
    parallelism: int = READ_PARALLELISM,
) -> pa.Table:
    """One slice's merged rows in the table's schema (`columns`: a projection; the record
    key is read whatever it says, and dropped again when not asked for). Its base and logs
    are fetched concurrently (`parallelism` 1: one after the other, for a caller that
    already reads several slices at once)."""
    return SliceReader(store, schema, columns, parallelism).read([sl])[0]


def read_slices(
    store: ObjectStore,
    slices: Sequence[MorSlice],
    schema: pa.Schema | None,
    columns: Sequence[str] | None = None,
) -> pa.Table | None:
    """Every slice's merged rows, concatenated in the order given (None: no slices)."""
    tables = SliceReader(store, schema, columns).read(slices)
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default")
