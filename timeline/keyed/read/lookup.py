"""The current rows of some record keys, read through the table's index.

A lookup asks the index the writers use (keyed/write/planner.py) which file slices may hold
the keys (the record-level index when built and current, else key ranges and bloom filters;
on a merge-on-read table a slice's logs count as well, keyed/index/merge_on_read.py) and
reads only those: a copy-on-write base file as it is, a merge-on-read slice merged with its
logs (keyed/read/slices.py). The rows the merge keeps are then filtered by key, so a key
never written, or deleted, has no row; a false positive of the index costs a read, never a
wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ...parquet_io import read_files
from ...schema import no_rows
from ..index import IndexFactory, KeyIndex, SliceIndex, choose_index
from ..keys import RECORD_KEY_COL, integer_key_column
from ..policies import TableType
from ..properties import PropertiesError
from .slices import READ_PARALLELISM, read_slices

if TYPE_CHECKING:
    from ...file_groups import FileSlice
    from ...snapshot import TableState
    from ..context import KeyedTable
    from ..properties import KeyedProperties


def _possible(keys: Sequence[str], integer_key: str | None) -> list[str]:
    """`keys` without repeats, and without those no row can hold: a table keyed by one
    integer column words each key as its number (`str(n)`), so any other text is in no
    file (and the index, which compares such keys as numbers, is not asked about it)."""
    out = list(dict.fromkeys(str(k) for k in keys))
    if integer_key is None:
        return out
    kept = []
    for k in out:
        try:
            if str(int(k)) == k:
                kept.append(k)
        except ValueError:
            continue
    return kept


def _index(
    table: KeyedTable, st: TableState, props: KeyedProperties, slices: dict[str, FileSlice]
) -> KeyIndex:
    """The index a write of this table would ask: the `keyed_index` setting's choice (the
    record-level index when built and current: key -> file group; else key ranges and
    blooms), on a merge-on-read table over whole slices (a group's base file and logs)."""
    factory: IndexFactory = choose_index(table.settings.keyed_index)
    inner = factory(table.store, st, props)
    if props.table_type == TableType.MERGE_ON_READ or st.is_merge_on_read():
        return SliceIndex(inner, slices)
    return inner


def candidate_slices(table: KeyedTable, st: TableState, keys: Sequence[str]) -> list[FileSlice]:
    """The latest slices of `st` the index says may hold one of `keys` (record keys as
    text), in base-file order; none is read."""
    props = table.properties
    if props is None:
        raise PropertiesError(f"a record lookup needs a keyed table: {table.uri} has no record key")
    slices = st.latest_slices()
    asked = _possible(keys, integer_key_column(props, st.schema()))
    if not asked or not slices:
        return []
    by_base = {sl.base.path: sl for sl in slices.values()}
    bases = sorted(by_base)
    found = _index(table, st, props, slices).candidates([by_base[p].base for p in bases], asked)
    return [by_base[p] for p in bases if p in found]


def lookup_keys(
    table: KeyedTable, keys: Sequence[str], columns: Sequence[str] | None = None
) -> pa.Table:
    """The current rows of the records `keys` (record keys as text, as the
    `_flowledger_record_key` column holds them) in the table's schema, `columns` only when
    given; a key never written or deleted has no row, a key stored in several partitions (a
    partition-scoped key) one per partition. Reads only the slices the index names."""
    st = table.state()
    schema = st.schema()
    picked = candidate_slices(table, st, keys)
    if not picked:
        return no_rows(schema, columns)
    wanted: list[str] | None = None
    if columns is not None:  # the key column is read to filter by, whatever `columns` says
        wanted = [*columns] + ([] if RECORD_KEY_COL in columns else [RECORD_KEY_COL])
    if st.is_merge_on_read():
        key_col = integer_key_column(table.properties, schema)
        rows = read_slices(table.store, picked, schema, wanted, key_col=key_col)
    else:
        files = [sl.base for sl in picked]
        rows = read_files(table.store, files, wanted, schema, parallelism=READ_PARALLELISM)
    if rows is None:
        return no_rows(schema, columns)
    asked = pa.array(list(dict.fromkeys(str(k) for k in keys)), pa.string())
    rows = rows.filter(pc.is_in(rows.column(RECORD_KEY_COL), value_set=asked))
    return rows if columns is None else rows.select(list(columns))


__all__ = ["candidate_slices", "lookup_keys"]
