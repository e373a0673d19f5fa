"""The per-file term index: distinct (field=value, row group) pairs, sorted by term.

It plays Lucene's part in NiFi: a lookup reads the index row group(s) whose min/max cover
the term (a GET each), then only the data row groups it names. Ranges (time, size, event id)
need no index: Parquet row-group statistics of the sorted data file answer them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SEP = "="

#: Fields whose value lives in an attribute (NiFi's Filename searchable field).
ATTRIBUTE_FIELDS = MappingProxyType({"filename": "filename"})


def attr_field(name: str) -> str:
    return f"attr.{name}"


def attribute_values(table: pa.Table, name: str) -> pa.ChunkedArray:
    """The attribute's value after each event: updated if set there, else previous."""
    key = pa.scalar(name, pa.string())
    updated = pc.map_lookup(table.column("updated_attributes"), key, "first")
    previous = pc.map_lookup(table.column("previous_attributes"), key, "first")
    return pc.coalesce(updated, previous)


def attribute_value_candidates(table: pa.Table, name: str) -> list[pa.Array]:
    """Every value the attribute has in an event's updated or previous attributes: a
    superset of `attribute_values` (a previous value the update replaced is in it too), for
    filters that may hold extra values but must miss none. Read from the maps' flat entries:
    a few kernels, where `attribute_values` looks the key up row by row (~10x the time)."""
    out = []
    for column in ("updated_attributes", "previous_attributes"):
        for chunk in table.column(column).chunks:
            if not len(chunk):
                continue
            # .keys/.items are the whole children, whatever the slice: cut them by offsets.
            start = chunk.offsets[0].as_py()
            length = chunk.offsets[-1].as_py() - start
            if length:
                keys = chunk.keys.slice(start, length)
                items = chunk.items.slice(start, length)
                out.append(items.filter(pc.equal(keys, name)))
    return out


def field_values(table: pa.Table, field: str) -> list[tuple[pa.ChunkedArray, pa.Array | None]]:
    """(values, row index or None for 1:1) per source of a searchable field.

    Like NiFi, the FlowFile UUID field also holds the parent and child UUIDs of an event, so
    a FlowFile's search finds the FORK/JOIN/CLONE/REPLAY events that link it.
    """
    if field in ATTRIBUTE_FIELDS:
        return [(attribute_values(table, ATTRIBUTE_FIELDS[field]), None)]
    if field.startswith("attr."):
        return [(attribute_values(table, field[5:]), None)]
    if field == "flowfile_uuid":
        out: list[tuple[pa.ChunkedArray, pa.Array | None]] = [(table.column(field), None)]
        for name in ("parent_uuids", "child_uuids"):
            col = table.column(name).combine_chunks()
            out.append((pa.chunked_array([pc.list_flatten(col)]), pc.list_parent_indices(col)))
        return out
    return [(table.column(field), None)]


def _field_terms(
    field: str, values: pa.Array, rgs: pa.Array, row_groups: int
) -> tuple[pa.Array, pa.Array]:
    """Distinct (term, rg) of one field, sorted, without sorting or hashing long strings
    more than once: dictionary-encode the values, rank the (distinct) dictionary, then
    dedupe and sort (rank * row_groups + rg) as integers."""
    keep = pc.is_valid(values)
    values, rgs = pc.filter(values, keep), pc.filter(rgs, keep)
    if len(values) == 0:
        return pa.array([], pa.string()), pa.array([], pa.int32())
    enc = pc.dictionary_encode(values)
    dictionary = enc.dictionary
    order = pc.array_sort_indices(dictionary)  # rank -> dictionary index
    rank = pc.array_sort_indices(order)  # dictionary index -> rank (inverse permutation)
    r = pa.scalar(row_groups, pa.int64())
    key = pc.add(
        pc.multiply(pc.cast(pc.take(rank, enc.indices), pa.int64()), r), pc.cast(rgs, pa.int64())
    )
    key = pc.unique(key)
    key = pc.take(key, pc.array_sort_indices(key))
    ranks = pc.divide(key, r)
    rg = pc.cast(pc.subtract(key, pc.multiply(ranks, r)), pa.int32())
    value = pc.take(dictionary, pc.take(order, ranks))
    term = pc.binary_join_element_wise(pa.scalar(field, pa.string()), value, SEP)
    return term, rg


def build_terms(table: pa.Table, fields: Iterable[str], row_group_events: int) -> pa.Table:
    """Distinct (term, rg), sorted by term then rg, for `table` already sorted by event id.

    All terms of a field share the prefix `field=`, so they are contiguous in sorted order:
    sorting each field's block and the blocks by prefix sorts the whole index."""
    n = table.num_rows
    rows = pa.array(range(n), type=pa.int64())
    rg_of_row = pc.cast(pc.divide(rows, row_group_events), pa.int32())
    row_groups = max(1, (n + row_group_events - 1) // row_group_events)
    blocks: list[tuple[str, pa.Array, pa.Array]] = []
    for field in fields:
        parts_v: list[pa.Array] = []
        parts_rg: list[pa.Array] = []
        for values, parents in field_values(table, field):
            flat = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            parts_v.append(flat)
            parts_rg.append(rg_of_row if parents is None else pc.take(rg_of_row, parents))
        term, rg = _field_terms(
            field, pa.concat_arrays(parts_v), pa.concat_arrays(parts_rg), row_groups
        )
        blocks.append((f"{field}{SEP}", term, rg))
    blocks.sort(key=lambda b: b[0])
    if not blocks:
        return pa.table({"term": pa.array([], pa.string()), "rg": pa.array([], pa.int32())})
    return pa.table(
        {
            "term": pa.concat_arrays([b[1] for b in blocks]),
            "rg": pa.concat_arrays([b[2] for b in blocks]),
        }
    )


def term_range(field: str, literal_prefix: str) -> tuple[str, str]:
    """[lo, hi] of index terms that can match a value starting with `literal_prefix`."""
    lo = f"{field}{SEP}{literal_prefix}"
    return lo, lo + "\U0010ffff"


@dataclass(frozen=True)
class TermBounds:
    """(min term, max term) of each index row group (None where statistics are missing);
    `ordered`: all known, so, the index being sorted, a binary search finds a term's."""

    bounds: tuple[tuple[str, str] | None, ...]
    ordered: bool


def row_group_bounds(md: pq.FileMetaData) -> TermBounds:
    out: list[tuple[str, str] | None] = []
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(0).statistics
        out.append((st.min, st.max) if st is not None and st.has_min_max else None)
    return TermBounds(tuple(out), all(b is not None for b in out))


def candidate_row_groups(tb: TermBounds, lo: str, hi: str) -> list[int]:
    """Index row groups whose term range overlaps [lo, hi] (~1,000 row groups per file)."""
    if not tb.ordered:
        return [i for i, b in enumerate(tb.bounds) if b is None or not (b[1] < lo or b[0] > hi)]
    known = cast(tuple[tuple[str, str], ...], tb.bounds)
    first = bisect.bisect_left(known, lo, key=_max_term)  # the first whose max >= lo
    out = []
    for i in range(first, len(known)):
        if known[i][0] > hi:
            break
        out.append(i)
    return out


def _max_term(b: tuple[str, str]) -> str:
    return b[1]


def _as_py(v: pa.Scalar) -> Any:
    return v.as_py()


def matching_row_groups(terms: pa.Table, lo: str, hi: str, pattern: str | None) -> set[int]:
    """Data row groups named by a term in [lo, hi] that matches the LIKE `pattern`."""
    col = terms.column("term")
    if lo == hi and pattern is None:
        # The terms are sorted: a binary search, not a comparison of all 4,096 of them.
        first = bisect.bisect_left(col, lo, key=_as_py)
        end = bisect.bisect_right(col, lo, first, key=_as_py)
        return set(terms.column("rg").slice(first, end - first).to_pylist())
    if lo == hi:
        mask = pc.equal(col, lo)
    else:
        mask = pc.and_(pc.greater_equal(col, lo), pc.less_equal(col, hi))
        if pattern is not None:
            mask = pc.and_(mask, pc.match_like(col, pattern))
    return set(pc.filter(terms.column("rg"), mask).to_pylist())
