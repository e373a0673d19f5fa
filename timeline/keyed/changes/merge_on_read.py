"""Incremental reads of merge-on-read tables, changes still in logs included.

Same contract as keyed/changes/ranges.py (ranges by completion order, begin exclusive), read
from merged slices: the latest state of the file groups the range's delta commits touched.
A compaction changes no record (rows keep their commit times), so it adds no group. (CDC
reads of both table types are ranges.py's `cdc`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ...file_groups import is_compaction
from ...file_groups.log_files import logs_of
from ..keys import COMMIT_TIME_COL, integer_key_column
from ..read import read_slices
from .ranges import ChangeRange

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
