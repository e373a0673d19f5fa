"""Incremental and CDC reads of merge-on-read tables, changes still in logs included.

Same contract as keyed/changes/ranges.py (ranges by completion order, begin exclusive), read from
merged
slices: a delta commit's changes are the difference of its touched file groups' merged rows
before and after it. A compaction changes no record (rows keep their commit times), so it
yields no change rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...file_groups import FileSlice, is_compaction
from ...file_groups.log_files import logs_of
from ..keys import COMMIT_TIME_COL, RECORD_KEY_COL, integer_key_column
from ..properties import PARTITION, KeyedProperties
from ..read import read_slices
from .ranges import (
    DELETE,
    INSERT,
    UPDATE,
    ChangeRange,
    cdc_schema,
    change_row,
    walk,
)

if TYPE_CHECKING:
    from ..context import KeyedTable


def incremental(
    table: KeyedTable, begin: str | None, end: str | None = None, *, full_scan: bool = False
) -> pa.Table:
    r = ChangeRange(table, begin, end)
    times = pa.array(sorted({e.time for e in r.in_range}), pa.string())
    slices = r.st.latest_slices(r.end_seq)
    if full_scan:
        picked = list(slices.values())
    else:
        touched: set[str] = set()
        for e in r.in_range:
            if not is_compaction(e):
                touched |= {f.group for f in e.added} | {
                    lf.file_group for lf in logs_of(e.metadata)
                }
        picked = [slices[g] for g in sorted(touched) if g in slices]
        r.check_readable(cdc=False, reads=[p for sl in picked for p in sl.objects()])
    key_col = integer_key_column(table.properties, r.schema)
    with r.reading(cdc=False):
        data = read_slices(table.store, picked, r.schema, key_col=key_col)
    if data is None:
        return r.schema.empty_table() if r.schema is not None else pa.table({})
    if data.num_rows == 0 or COMMIT_TIME_COL not in data.column_names:
        return data.slice(0, 0)
    return data.filter(pc.is_in(data.column(COMMIT_TIME_COL), value_set=times))


def _rows_by_id(
    table: KeyedTable, r: ChangeRange, slices: list[FileSlice], props: KeyedProperties
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    key_col = integer_key_column(props, r.schema)
    for sl in slices:
        data = read_slices(table.store, [sl], r.schema, key_col=key_col)
        if data is None:
            continue
        for row in data.to_pylist():
            key = str(row[RECORD_KEY_COL])
            out[f"{sl.partition}\x00{key}" if props.key_scope == PARTITION else key] = row
    return out


def cdc(
    table: KeyedTable, props: KeyedProperties, begin: str | None, end: str | None = None
) -> pa.Table:
    r = ChangeRange(table, begin, end)
    r.check_readable(cdc=True)
    with r.reading(cdc=True):
        return _cdc(table, r, props)


def _cdc(table: KeyedTable, r: ChangeRange, props: KeyedProperties) -> pa.Table:
    out: list[dict[str, Any]] = []
    for e, before_slices, after_slices in walk(r.writes, r.begin_seq):
        if is_compaction(e):
            continue  # a compaction changes no record
        before = _rows_by_id(table, r, before_slices, props)
        after = _rows_by_id(table, r, after_slices, props)
        changes: list[dict[str, Any]] = []
        for ident, row in after.items():
            if row.get(COMMIT_TIME_COL) != e.time:
                continue
            old = before.get(ident)
            changes.append(change_row(UPDATE if old is not None else INSERT, e.time, row, old, row))
        for ident, old in before.items():
            if ident not in after:
                changes.append(change_row(DELETE, e.time, old, old, None))
        out += sorted(changes, key=lambda c: (c["record_key"], c["op"]))
    return pa.Table.from_pylist(out, schema=cdc_schema(r.schema))
