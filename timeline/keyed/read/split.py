"""Splitting a merge-on-read base by its slice's log keys: the rows no log entry names (the
most of a base, untouched by the merge) and the rows some entry names (what the merge needs).

Keys are matched as the merge matches them (keyed/read/merge.py): as numbers when the table's
record key is a single integer column, else as the record key text. For integer keys the
base's key column is usually ascending (a base is written in key order), and then the named
rows are found by a binary search of the few log keys into it, not by hashing every base row
against a set of the log keys; a base that is not ascending is tested by hashing. The copy is
made per chunk (a decoded row group) and only of the chunks that lose rows: a chunk no entry
names is passed on as it is, without a copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..keys import RECORD_KEY_COL
from .merge import concat, named_mask


def split_named(
    base: pa.Table, logs: Sequence[pa.Table], key_col: str | None
) -> tuple[pa.Table, pa.Table]:
    """`base` as (rows no entry of `logs` names, rows some entry names), each in base order."""
    at = named_rows(base, logs, key_col)
    if at is None or not len(at):
        return base, base.slice(0, 0)
    return _without(base, at), base.take(pa.array(at, pa.int64()))


def named_rows(base: pa.Table, logs: Sequence[pa.Table], key_col: str | None) -> np.ndarray | None:
    """Ascending positions of the rows of `base` some entry of `logs` names (None: no entry,
    or no base row)."""
    entries = [lg for lg in logs if lg.num_rows]
    if not entries or not base.num_rows:
        return None
    ints = _int_keys(base, entries, key_col) if key_col else None
    if ints is None:
        mask = named_mask(base, entries, key_col)
        return None if mask is None else _positions(mask)
    bkeys, lkeys = ints
    if len(bkeys) < 2 or bool(np.all(bkeys[1:] > bkeys[:-1])):
        return _searched(bkeys, lkeys)
    return _positions(pc.is_in(pa.array(bkeys), value_set=pa.array(lkeys)))


def _searched(ascending: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Positions in `ascending` (strictly increasing) of the values in `keys`, ascending and
    each once (a key named by several entries is one row)."""
    keys = np.sort(keys)
    at: np.ndarray = np.searchsorted(ascending, keys)
    inside = at < len(ascending)
    at = at[inside]
    at = at[ascending[at] == keys[inside]]
    if not len(at):
        return at
    first: np.ndarray = at[np.concatenate([[True], at[1:] != at[:-1]])]
    return first


def _int_keys(
    base: pa.Table, entries: list[pa.Table], key_col: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """The base's keys and the entries' keys as int64 numbers, as the merge matches them: a
    delete entry, which carries the record key text alone, by that text's number. None: keys
    that are not all such numbers (matched by `named_mask` instead)."""
    if base.schema.get_field_index(key_col) < 0:  # (not `column_names`: a list per call)
        return None
    bcol = base.column(key_col)
    if not _fits(bcol.type) or bcol.null_count:
        return None
    lkeys = []
    for lg in entries:
        if lg.schema.get_field_index(key_col) < 0:
            return None
        col = lg.column(key_col)
        if not (_fits(col.type) or pa.types.is_null(col.type)):
            return None
        if col.null_count:
            try:
                text = pc.cast(lg.column(RECORD_KEY_COL), pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None  # a key text that is no number
            col = pc.coalesce(col.cast(pa.int64()), text)
            if col.null_count:
                return None
        lkeys.append(np.asarray(col.to_numpy(), dtype=np.int64))
    return np.asarray(bcol.to_numpy(), dtype=np.int64), np.concatenate(lkeys)


def _fits(typ: pa.DataType) -> bool:
    """An integer type whose every value is an int64 (not uint64: it could wrap)."""
    return bool(pa.types.is_integer(typ)) and typ != pa.uint64()


def _positions(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.indices_nonzero(mask).to_numpy(zero_copy_only=False), dtype=np.int64)


def _without(base: pa.Table, at: np.ndarray) -> pa.Table:
    """`base` less the rows at `at` (ascending), chunk by chunk: a chunk that loses no row is
    kept as it is (no copy), the others filtered."""
    if not base.num_columns or base.column(0).num_chunks <= 1:
        return _filtered(base, at)
    batches = base.to_batches()
    starts = np.cumsum([0, *(len(b) for b in batches)])
    cuts = np.searchsorted(at, starts)
    parts = []
    for i, batch in enumerate(batches):
        gone = at[cuts[i] : cuts[i + 1]] - starts[i]
        t = pa.Table.from_batches([batch], base.schema)
        parts.append(_filtered(t, gone) if len(gone) else t)
    return concat(parts)


def _filtered(t: pa.Table, gone: np.ndarray) -> pa.Table:
    keep = np.ones(t.num_rows, dtype=bool)
    keep[gone] = False
    return t.filter(pa.array(keep))
