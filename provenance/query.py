"""A typed search like NiFi's `Query`: terms (exact, `*`/`?` wildcards, inverted), a time
range, a size range and a maximum number of results, newest first."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import cachetools
import pyarrow as pa
import pyarrow.compute as pc

from .index import ATTRIBUTE_FIELDS, SEP, attribute_values, term_range
from .settings import DEFAULT_INDEXED_FIELDS

SEARCHABLE_FIELDS = (*DEFAULT_INDEXED_FIELDS, "component_type")


@dataclass(frozen=True)
class SearchTerm:
    """`field` is a searchable field (see SEARCHABLE_FIELDS) or `attr.<attribute name>`."""

    field: str
    value: str
    inverted: bool = False

    def __post_init__(self) -> None:
        if self.field not in SEARCHABLE_FIELDS and not self.field.startswith("attr."):
            raise ValueError(
                f"{self.field!r} is not searchable: use one of {', '.join(SEARCHABLE_FIELDS)} "
                "or attr.<attribute name>"
            )

    @property
    def is_wildcard(self) -> bool:
        return "*" in self.value or "?" in self.value


@dataclass(frozen=True)
class Query:
    terms: tuple[SearchTerm, ...] = ()
    #: Event time range in epoch milliseconds, both ends inclusive (as NiFi's).
    start_time: int | None = None
    end_time: int | None = None
    #: FlowFile size range in bytes, inclusive.
    min_file_size: int | None = None
    max_file_size: int | None = None
    max_results: int = 1000


def like_pattern(value: str) -> str:
    """NiFi/Lucene wildcards (`*`, `?`) as a SQL LIKE pattern with `\\` escapes."""
    out = []
    for ch in value:
        if ch in "%_\\":
            out.append("\\" + ch)
        elif ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        else:
            out.append(ch)
    return "".join(out)


def literal_prefix(value: str) -> str:
    cut = [i for i in (value.find("*"), value.find("?")) if i >= 0]
    return value[: min(cut)] if cut else value


def index_probe(term: SearchTerm) -> tuple[str, str, str | None]:
    """(lo, hi, LIKE pattern on the index's `term` column) for a positive term."""
    if not term.is_wildcard:
        t = f"{term.field}{SEP}{term.value}"
        return t, t, None
    lo, hi = term_range(term.field, literal_prefix(term.value))
    return lo, hi, like_pattern(f"{term.field}{SEP}") + like_pattern(term.value)


def _match(values: pa.ChunkedArray | pa.Array, term: SearchTerm) -> pa.Array:
    if term.is_wildcard:
        m = pc.match_like(values, like_pattern(term.value))
    else:
        m = pc.equal(values, pa.scalar(term.value, pa.string()))
    out = pc.fill_null(m, False)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


class RowPositions:
    """0..n-1 as int64 arrays, kept by the query engine that owns this object: a lookup reads
    row groups of a few sizes, and building the array from a Python range costs more than the
    lookup's own kernels. Bounded; thread-safe; the arrays are immutable."""

    def __init__(self, sizes: int = 8) -> None:
        self._arrays: cachetools.LRUCache[int, pa.Array] = cachetools.LRUCache(sizes)
        self._lock = threading.Lock()

    def __call__(self, n: int) -> pa.Array:
        with self._lock:
            found = self._arrays.get(n)
        if found is None:
            found = pa.array(range(n), pa.int64())
            with self._lock:
                self._arrays[n] = found
        return found


def term_mask(table: pa.Table, term: SearchTerm, positions: RowPositions | None = None) -> pa.Array:
    """Rows matching the term (before inversion). `positions`: the caller's row positions
    (a query engine keeps one; without it they are built for this call)."""
    f = term.field
    if f in ATTRIBUTE_FIELDS:
        return _match(attribute_values(table, ATTRIBUTE_FIELDS[f]), term)
    if f.startswith("attr."):
        return _match(attribute_values(table, f[5:]), term)
    mask = _match(table.column(f), term)
    if f == "flowfile_uuid":
        for name in ("parent_uuids", "child_uuids"):
            col = table.column(name).combine_chunks()
            hits = _match(pc.list_flatten(col), term)
            rows = pc.filter(pc.list_parent_indices(col), hits)
            if len(rows):
                at = (positions or RowPositions(1))(table.num_rows)
                mask = pc.or_(mask, pc.is_in(at, rows))
    return mask


def _ts(ms: int) -> pa.Scalar:
    return pa.scalar(ms, pa.int64()).cast(pa.timestamp("ms"))


def query_mask(table: pa.Table, q: Query, positions: RowPositions | None = None) -> pa.Array:
    """Rows matching every part of `q` (`positions` as for `term_mask`)."""
    mask = pa.repeat(pa.scalar(True), table.num_rows)
    for term in q.terms:
        m = term_mask(table, term, positions)
        mask = pc.and_(mask, pc.invert(m) if term.inverted else m)
    if q.start_time is not None:
        mask = pc.and_(
            mask,
            pc.fill_null(pc.greater_equal(table.column("event_time"), _ts(q.start_time)), False),
        )
    if q.end_time is not None:
        mask = pc.and_(
            mask, pc.fill_null(pc.less_equal(table.column("event_time"), _ts(q.end_time)), False)
        )
    if q.min_file_size is not None:
        mask = pc.and_(
            mask, pc.fill_null(pc.greater_equal(table.column("file_size"), q.min_file_size), False)
        )
    if q.max_file_size is not None:
        mask = pc.and_(
            mask, pc.fill_null(pc.less_equal(table.column("file_size"), q.max_file_size), False)
        )
    return mask
