"""Reading merge-on-read slices: a base file merged with its log blocks.

The merge is the table's: the writer of each delta commit already decided, by the merge mode
against the state it read, which records win (as copy-on-write does), and delta commits
touching one file group conflict with each other, so a slice's blocks apply in completion
order and the latest version of a key wins; a delete block entry removes the key. Done with
pyarrow sorts and numpy masks, one file group at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import ObjectStore

from ..parquet_io import read_files
from ..schema import conform
from .keys import RECORD_KEY_COL
from .logfile import DELETE, OP_COL, read_log
from .slices import MorSlice

#: File groups read at once by a snapshot read (GETs in flight).
READ_PARALLELISM = 8


def merge(base: pa.Table, logs: Sequence[pa.Table]) -> pa.Table:
    """`base` (no op column) with `logs` (op column) applied in order; same columns as base."""
    logs = [lg for lg in logs if lg.num_rows]
    if not logs:
        return base
    pieces = [base, *(lg.drop_columns([OP_COL]) for lg in logs)]
    rank = [np.zeros(base.num_rows, dtype=np.int64)]
    deleted = [np.zeros(base.num_rows, dtype=bool)]
    for i, lg in enumerate(logs, start=1):
        rank.append(np.full(lg.num_rows, i, dtype=np.int64))
        ops = lg.column(OP_COL).to_numpy(zero_copy_only=False)
        deleted.append(ops == DELETE)
    every = pa.concat_tables(pieces, promote_options="default")
    order_rank = np.concatenate(rank)
    is_deleted = np.concatenate(deleted)
    keys = every.column(RECORD_KEY_COL)
    order = pc.sort_indices(
        pa.table({"k": keys, "r": order_rank}), [("k", "ascending"), ("r", "descending")]
    ).to_numpy()
    sorted_keys = keys.take(pa.array(order)).to_numpy(zero_copy_only=False)
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_keys[1:] != sorted_keys[:-1]
    winners = order[first]
    winners = np.sort(winners[~is_deleted[winners]])
    return every.take(pa.array(winners, pa.int64()))


def read_slice(
    store: ObjectStore,
    sl: MorSlice,
    schema: pa.Schema | None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """One slice's merged rows in the table's schema (`columns`: a projection; the record
    key is read whatever it says, and dropped again when not asked for)."""
    wanted = None
    if columns is not None:
        wanted = list(columns) + ([RECORD_KEY_COL] if RECORD_KEY_COL not in columns else [])
    base = read_files(store, [sl.base], wanted, schema)
    if base is None:  # pragma: no cover - read_files returns None only for no files
        base = pa.table({})
    logs = []
    for _, lf in sl.logs:
        rows = read_log(store, lf)
        ops = rows.column(OP_COL)
        body = rows.drop_columns([OP_COL])
        body = conform(body, schema, wanted) if schema is not None else body
        if wanted is not None:
            body = body.select([c for c in wanted if c in body.column_names])
        logs.append(body.append_column(OP_COL, ops))
    out = merge(base, logs)
    if columns is not None and RECORD_KEY_COL not in columns:
        out = out.drop_columns([RECORD_KEY_COL])
    return out


def read_slices(
    store: ObjectStore,
    slices: Sequence[MorSlice],
    schema: pa.Schema | None,
    columns: Sequence[str] | None = None,
) -> pa.Table | None:
    if len(slices) <= 1:
        tables = [read_slice(store, sl, schema, columns) for sl in slices]
    else:  # one file group per task: object-store latency overlaps, memory stays per group
        with ThreadPoolExecutor(min(READ_PARALLELISM, len(slices))) as pool:
            tables = list(pool.map(lambda sl: read_slice(store, sl, schema, columns), slices))
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default")
