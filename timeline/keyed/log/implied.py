"""What a log block's header implies about its rows (log formats 2 and later): the columns
a block leaves out when its rows agree with the header, and putting them back on decoding.

The commit time of every row is the block's instant, the op column is its upserts first then
its deletes (the header counts the upserts), and a record key that is the text of one key
column (a single integer or string key) is that column cast to text. Each is left out only
when the rows really are so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..keys import COMMIT_TIME_COL, META_COLUMNS, RECORD_KEY_COL

OP_COL = "_flowledger_op"
UPSERT = "U"
DELETE = "D"
_REBUILT = (*META_COLUMNS, OP_COL)


def implied_fields(rows: pa.Table, instant: str, key_from: str | None) -> dict[str, Any]:
    """The header fields that let `rows`' commit time, op and record key columns be left
    out (each only where the rows agree with what it implies)."""
    out: dict[str, Any] = {}
    canonical = [*META_COLUMNS, *(c for c in rows.column_names if c not in _REBUILT), OP_COL]
    if rows.column_names != canonical:
        out["columns"] = rows.column_names
    n = rows.num_rows
    t = rows.column(COMMIT_TIME_COL) if COMMIT_TIME_COL in rows.column_names else None
    if t is not None and not t.null_count and (n == 0 or pc.all(pc.equal(t, instant)).as_py()):
        out["commit_time"] = "instant"
    ops = np.asarray(rows.column(OP_COL).to_numpy(zero_copy_only=False))
    upserts = int(np.count_nonzero(ops == UPSERT))
    if (ops[:upserts] == UPSERT).all() and (ops[upserts:] == DELETE).all():
        out["upserts"] = upserts
    if key_from and key_from in rows.column_names and RECORD_KEY_COL in rows.column_names:
        col, key = rows.column(key_from), rows.column(RECORD_KEY_COL)
        plain = pa.types.is_integer(col.type) or pa.types.is_string(col.type)
        if plain and not col.null_count and not key.null_count:
            same = n == 0 or pc.all(pc.equal(pc.cast(col, pa.string()), key)).as_py()
            if same:
                out["record_key_from"] = key_from
    return out


def rebuild_columns(rows: pa.Table, header: Mapping[str, Any]) -> pa.Table:
    """`rows` (their op column already there) with the commit time and record key columns
    `header` implies put back, in written order (format 2 and later)."""
    n = rows.num_rows
    if "commit_time" in header:
        t = str(header["instant"])
        rows = rows.append_column(COMMIT_TIME_COL, pa.repeat(pa.scalar(t, pa.string()), n))
    if "record_key_from" in header:
        key = pc.cast(rows.column(str(header["record_key_from"])), pa.string())
        rows = rows.append_column(RECORD_KEY_COL, key)
    if "columns" in header:
        return rows.select([str(c) for c in header["columns"]])
    names = rows.column_names  # (a fresh list per call: read once, as a snapshot decodes
    # thousands of blocks)
    rest = [c for c in names if c not in _REBUILT]
    return rows.select([c for c in (*META_COLUMNS, *rest, OP_COL) if c in names])
