"""Reading merge-on-read slices: a base file merged with its log blocks.

The merge is the table's: the writer of each delta commit already decided, by the merge mode
against the state it read, which records win (as copy-on-write does), and delta commits
touching one file group conflict with each other, so a slice's blocks apply in completion
order and the latest version of a key wins; a delete block entry removes the key.

Vectorized, one file group at a time: the logs (small) are concatenated and reduced to the
latest entry of each key (a hash group-by); base rows whose key a log names are dropped (a
hash `is_in`, no sort of the base); the surviving upserts follow. Every object of a read (base
files and logs) is fetched once, through one bounded pool the reader owns, so a slice's logs
are fetched concurrently with each other and with other slices' objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import ObjectStore

from ..metadata import DataFile
from ..parquet_io import read_files
from ..schema import conform
from .keys import RECORD_KEY_COL
from .logfile import DELETE, OP_COL, LogFile, read_log
from .slices import MorSlice

#: Objects (base files and logs) one snapshot read fetches at once (GETs in flight).
READ_PARALLELISM = 8


def merge(base: pa.Table, logs: Sequence[pa.Table]) -> pa.Table:
    """`base` (no op column) with `logs` (op column) applied in order; same columns as base:
    base rows not named by a log in base order, then the logs' surviving upserts."""
    logs = [lg for lg in logs if lg.num_rows]
    if not logs:
        return base
    every = pa.concat_tables(logs, promote_options="default")
    n = every.num_rows
    # the latest entry of each key: the highest position (logs are in completion order)
    at = pa.table({"k": every.column(RECORD_KEY_COL), "i": np.arange(n, dtype=np.int64)})
    latest = np.sort(at.group_by("k").aggregate([("i", "max")]).column("i_max").to_numpy())
    if len(latest) < n:
        every = every.take(pa.array(latest, pa.int64()))
    named = every.column(RECORD_KEY_COL)
    kept = base.filter(pc.invert(pc.is_in(base.column(RECORD_KEY_COL), value_set=named)))
    upserts = every.filter(pc.not_equal(every.column(OP_COL), DELETE)).drop_columns([OP_COL])
    return pa.concat_tables([kept, upserts], promote_options="default")


def _projection(columns: Sequence[str] | None) -> list[str] | None:
    """The columns a slice read fetches: the record key whatever `columns` says."""
    if columns is None:
        return None
    return list(columns) + ([RECORD_KEY_COL] if RECORD_KEY_COL not in columns else [])


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
    if columns is not None and RECORD_KEY_COL not in columns:
        return merged.drop_columns([RECORD_KEY_COL])
    return merged


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
        self.wanted = _projection(columns)
        self.parallelism = max(1, parallelism)

    def read(self, slices: Sequence[MorSlice]) -> list[pa.Table]:
        """Each slice's merged rows, in the order given. Every fetch is queued at once; a
        slice is merged as soon as its own objects are in, and they are then let go."""
        objects = sum(1 + len(sl.logs) for sl in slices)
        if objects <= 1 or self.parallelism == 1:
            return [
                _finish(
                    merge(
                        _base_rows(self.store, sl.base, self.schema, self.wanted),
                        [_log_rows(self.store, lf, self.schema, self.wanted) for _, lf in sl.logs],
                    ),
                    self.columns,
                )
                for sl in slices
            ]
        with ThreadPoolExecutor(min(self.parallelism, objects)) as pool:
            queued = [self._queue(pool, sl) for sl in slices]
            out = []
            for parts in queued:
                base, *logs = (fut.result() for fut in parts)
                out.append(_finish(merge(base, logs), self.columns))
            return out

    def _queue(self, pool: ThreadPoolExecutor, sl: MorSlice) -> list[Future[pa.Table]]:
        s, w = self.schema, self.wanted
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
