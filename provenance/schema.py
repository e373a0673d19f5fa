"""The Arrow/Parquet schema of events (the `provenance` view's columns, a contract stated in
docs/provenance.md) and conversions."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import fields
from types import MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.timeutil import to_ms

from .errors import InvalidEvent
from .event import EVENT_TYPES, LINKING, NEEDS_TRANSIT_URI, STORAGE_ORDER, ProvenanceEvent, now_ms

_S = pa.string()
_I64 = pa.int64()
_TS = pa.timestamp("ms")
_UUIDS = pa.list_(pa.string())
_ATTRS = pa.map_(pa.string(), pa.string())

SCHEMA = pa.schema(
    [
        ("event_id", pa.int64()),
        ("event_time", _TS),
        ("event_type", _S),
        ("flowfile_uuid", _S),
        ("lineage_start_date", _TS),
        ("event_duration_ms", pa.int64()),
        ("file_size", pa.int64()),
        ("previous_file_size", pa.int64()),
        ("component_id", _S),
        ("component_type", _S),
        ("transit_uri", _S),
        ("source_system_flowfile_identifier", _S),
        ("alternate_identifier_uri", _S),
        ("details", _S),
        ("relationship", _S),
        ("source_queue_identifier", _S),
        ("parent_uuids", _UUIDS),
        ("child_uuids", _UUIDS),
        ("previous_attributes", _ATTRS),
        ("updated_attributes", _ATTRS),
        ("content_claim_container", _S),
        ("content_claim_section", _S),
        ("content_claim_identifier", _S),
        ("content_claim_offset", pa.int64()),
        ("previous_content_claim_container", _S),
        ("previous_content_claim_section", _S),
        ("previous_content_claim_identifier", _S),
        ("previous_content_claim_offset", pa.int64()),
        # Stored but not in the view: the content repository verifies reads by checksum.
        ("content_claim_checksum", _S),
        ("previous_content_claim_checksum", _S),
        # Extension (not in the contract; last column of the view): fields of the source record
        # without a column, e.g. NiFi's eventId (re-ingest detection) and componentName.
        ("source_fields", _ATTRS),
    ]
)
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
#: The contract columns of the view (docs/provenance.md), unchanged and in order.
CONTRACT_COLUMNS: tuple[str, ...] = COLUMNS[:-3]
#: The columns of the SQL view `provenance`: the contract's, then the extension column.
VIEW_COLUMNS: tuple[str, ...] = (*CONTRACT_COLUMNS, "source_fields")

#: The SQL types of the `provenance` view (docs/provenance.md), in column order.
SQL_TYPES: Mapping[str, str] = MappingProxyType(
    {
        name: (
            "BIGINT"
            if t == pa.int64()
            else "TIMESTAMP"
            if t == _TS
            else "VARCHAR[]"
            if t == _UUIDS
            else "MAP(VARCHAR, VARCHAR)"
            if t == _ATTRS
            else "VARCHAR"
        )
        for name, t in zip(SCHEMA.names, SCHEMA.types, strict=True)
        if name in VIEW_COLUMNS
    }
)

assert {f.name for f in fields(ProvenanceEvent)} == set(COLUMNS)
assert STORAGE_ORDER == COLUMNS  # an event is the tuple of its values in column order


_VALUES = operator.methodcaller("values")


def _columns(events: Sequence[ProvenanceEvent]) -> list[tuple[Any, ...]]:
    """The events' values, column by column: an event is the tuple of its values in column
    order, so one C-level transposition does it, with no object made per event (objects
    per event ran the cyclic garbage collector during conversions)."""
    if set(map(type, events)) == {ProvenanceEvent}:
        return list(zip(*events, strict=True))
    return [tuple(map(operator.attrgetter(name), events)) for name in COLUMNS]


def _inferred(col: Sequence[Any], name: str) -> pa.Array:
    """Strings or ints as Arrow infers them: one pass in C that also tells the values'
    types apart (a float, bool, bytes or over-large int makes another type or an error),
    where an explicit type would accept floats for ints and bytes for strings."""
    try:
        return pa.array(col)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise InvalidEvent(f"{name}: a value of the wrong type") from None


def _strings(values: list[Any], name: str, nulls: bool) -> pa.Array:
    arr = _inferred(values, name)
    if arr.type == _S and (nulls or not arr.null_count):
        return arr
    if arr.type == pa.null() and (nulls or not values):  # every value null, or none
        return pa.nulls(len(values), _S)
    raise InvalidEvent(f"{name}: a value of the wrong type")


def _map_array(col: Sequence[Any], name: str) -> pa.Array:
    """dicts -> map<string, string> from flat key and value lists (what pa.array would
    build, at a third of the cost), their types told by Arrow's inference on the way."""
    n = len(col)
    if not any(col):  # every map empty (never null: events hold a dict)
        return _empty_lists(_ATTRS, n)
    keys = _strings(list(itertools.chain.from_iterable(col)), name, nulls=False)
    values = list(itertools.chain.from_iterable(map(_VALUES, col)))
    items = _strings(values, name, nulls=name != "source_fields")
    lengths = np.fromiter(map(len, col), np.int32, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items)


def _array(f: pa.Field, col: tuple[Any, ...]) -> pa.Array:
    """One column of the batch, its values' types checked on the way."""
    n = len(col)
    if f.type == _ATTRS:
        return _map_array(col, f.name)
    if f.type == _UUIDS:
        if not any(col):
            return _empty_lists(_UUIDS, n)
        if not set(map(type, itertools.chain.from_iterable(col))) <= {str}:
            raise InvalidEvent(f"{f.name}: a value of the wrong type")
        try:
            return pa.array(col, type=f.type)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InvalidEvent(f"{f.name}: {exc}") from None
    if col[0] is None and col.count(None) == n:  # identity tests only: cheap
        return _filled(None, n, f.type)
    arr = _inferred(col, f.name)
    if arr.type == f.type:
        return arr
    if f.type == _TS and arr.type == _I64:  # epoch milliseconds: the same 64-bit values
        return arr.view(_TS)
    raise InvalidEvent(f"{f.name}: a value of the wrong type")


def events_to_table(events: Sequence[ProvenanceEvent], max_attribute_length: int) -> pa.Table:
    """Columnar form of events, built column by column in C; attribute values are cut at
    `max_attribute_length` (NiFi). Raises InvalidEvent when a value has the wrong type for
    its column (callers validate record by record to name the event)."""
    if not events:
        return SCHEMA.empty_table()
    arrays = list(map(_array, SCHEMA, _columns(events)))
    t = pa.Table.from_arrays(arrays, schema=SCHEMA)
    for name in ("previous_attributes", "updated_attributes"):
        i = t.schema.get_field_index(name)
        t = t.set_column(i, name, truncate_map(t.column(name), max_attribute_length))
    return t


def check_events(table: pa.Table) -> None:
    """NiFi's rules on a built batch, vectorized (InvalidEvent for the first bad row)."""
    _validate_columns(table)
    for name in ("previous_file_size", "content_claim_offset", "previous_content_claim_offset"):
        col = table.column(name)
        smallest = pc.min(col).as_py()  # None when every value is null
        if smallest is not None and smallest < 0:
            negative = pc.fill_null(pc.less(col, 0), False)
            _first_bad(negative, f"{name} must be non-negative", table)


def _ms(v: Any) -> Any:
    # pyarrow gives naive datetimes for timestamp('ms'): UTC, never the local zone.
    return to_ms(v)


def rows_to_events(table: pa.Table) -> list[ProvenanceEvent]:
    out = []
    for row in table.to_pylist():
        row["event_time"] = _ms(row["event_time"])
        row["lineage_start_date"] = _ms(row["lineage_start_date"])
        for name in ("previous_attributes", "updated_attributes", "source_fields"):
            row[name] = dict(row[name] or ())
        row["parent_uuids"] = tuple(row["parent_uuids"] or ())
        row["child_uuids"] = tuple(row["child_uuids"] or ())
        out.append(ProvenanceEvent(**row))
    return out


def conform(table: pa.Table, max_attribute_length: int) -> pa.Table:
    """Cast a user table to SCHEMA (missing columns null), validate it as NiFi would, and
    truncate long attribute values. Raises InvalidEvent naming the first bad row."""
    n = table.num_rows
    names = set(table.column_names)
    arrays = []
    for f in SCHEMA:
        if f.name in names:
            col = table.column(f.name)
            if f.type == _TS and pa.types.is_integer(col.type):
                col = col.cast(pa.int64()).cast(_TS)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        elif f.type in (_UUIDS, _ATTRS):
            arrays.append(_empty_lists(f.type, n))
        elif f.name == "event_duration_ms":
            arrays.append(_filled(-1, n))
        else:
            arrays.append(_filled(None, n, f.type))
    extra = names - set(COLUMNS)
    if extra:
        raise InvalidEvent(f"unknown event fields: {', '.join(sorted(extra))}")
    out = pa.Table.from_arrays(arrays, schema=SCHEMA)
    out = out.set_column(0, "event_id", _filled(None, n))
    _validate_columns(out)
    for name in ("previous_attributes", "updated_attributes"):
        out = out.set_column(
            out.schema.get_field_index(name),
            name,
            truncate_map(out.column(name), max_attribute_length),
        )
    if out.column("event_time").null_count:
        now = pa.scalar(now_ms(), pa.int64()).cast(_TS)
        out = out.set_column(1, "event_time", pc.fill_null(out.column("event_time"), now))
    return out


def _filled(value: int | None, n: int, t: pa.DataType = _I64) -> pa.Array:
    """`n` times `value` (one C allocation: microseconds, so nothing to keep between calls)."""
    return pa.repeat(pa.scalar(value, t), n)


def _empty_lists(t: pa.DataType, n: int) -> pa.Array:
    offsets = pa.repeat(pa.scalar(0, pa.int32()), n + 1)
    if t == _ATTRS:
        empty = pa.array([], pa.string())
        return pa.MapArray.from_arrays(offsets, empty, empty)
    return pa.ListArray.from_arrays(offsets, pa.array([], pa.string()))


def truncate_map(col: pa.ChunkedArray, limit: int) -> pa.ChunkedArray:
    chunks = []
    for chunk in col.chunks:
        items = chunk.items
        if len(items) and (pc.max(pc.utf8_length(items)).as_py() or 0) > limit:
            items = pc.utf8_slice_codeunits(items, 0, limit)
            chunk = pa.MapArray.from_arrays(chunk.offsets, chunk.keys, items, mask=chunk.is_null())
        chunks.append(chunk)
    return pa.chunked_array(chunks, type=col.type)


def _blank(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.or_kleene(pc.is_null(col), pc.equal(pc.fill_null(col, ""), ""))


def _first_bad(mask: pa.ChunkedArray, why: str, table: pa.Table) -> None:
    idx = pc.index(pc.fill_null(mask, True), True).as_py()
    if idx >= 0:
        uuid = table.column("flowfile_uuid")[idx].as_py() or "?"
        raise InvalidEvent(f"event #{idx} of the batch (FlowFile {uuid}): {why}")


def _any_blank(col: pa.ChunkedArray) -> bool:
    """Whether `_blank` would flag a row (one kernel instead of three, on valid batches)."""
    if col.null_count:
        return True
    shortest = pc.min(pc.binary_length(col)).as_py()
    return shortest is not None and shortest == 0


def _validate_columns(t: pa.Table) -> None:
    """NiFi's rules, first failing rule first, at its first bad row. Each rule is checked
    with one cheap aggregate (or by the event types the batch holds) and its row mask is
    computed only when the batch breaks it: a valid batch costs a few kernels, not forty."""
    if t.num_rows == 0:
        return
    et = t.column("event_type")
    if _any_blank(et):
        _first_bad(_blank(et), "Event Type (event_type) must be set", t)
    present = set(pc.unique(et).to_pylist())
    if not present <= EVENT_TYPES:
        _first_bad(
            # Made here, only for a bad batch: pyarrow's first array built at import would
            # import pandas (0.3-0.4 s) in every process that imports provenance.
            pc.invert(pc.is_in(et, pa.array(sorted(EVENT_TYPES), _S))),
            "event_type is not one of NiFi's event types",
            t,
        )
    for name, label in (
        ("component_id", "Component ID"),
        ("component_type", "Component Type"),
        ("flowfile_uuid", "FlowFile UUID"),
    ):
        if _any_blank(t.column(name)):
            _first_bad(_blank(t.column(name)), f"{label} ({name}) must be set", t)
    size = t.column("file_size")
    if size.null_count:
        _first_bad(pc.is_null(size), "FlowFile Size (file_size) must be set", t)
    if pc.min(size).as_py() < 0:
        _first_bad(pc.less(size, 0), "file_size must be non-negative", t)

    def is_(types: Sequence[str]) -> pa.ChunkedArray:
        return pc.is_in(et, pa.array(types, _S))

    if present & NEEDS_TRANSIT_URI and _any_blank(t.column("transit_uri")):
        _first_bad(
            pc.and_(is_(sorted(NEEDS_TRANSIT_URI)), _blank(t.column("transit_uri"))),
            "Transit URI (transit_uri) must be set for RECEIVE/FETCH/SEND/UPLOAD events",
            t,
        )
    if "ROUTE" in present and _any_blank(t.column("relationship")):
        _first_bad(
            pc.and_(is_(["ROUTE"]), _blank(t.column("relationship"))),
            "Relationship (relationship) must be set for a ROUTE event",
            t,
        )
    if "ADDINFO" in present and _any_blank(t.column("alternate_identifier_uri")):
        _first_bad(
            pc.and_(is_(["ADDINFO"]), _blank(t.column("alternate_identifier_uri"))),
            "Alternate Identifier URI (alternate_identifier_uri) must be set for an ADDINFO event",
            t,
        )
    if not present & LINKING:
        return
    parents = pc.fill_null(pc.list_value_length(t.column("parent_uuids")), 0)
    children = pc.fill_null(pc.list_value_length(t.column("child_uuids")), 0)
    _first_bad(
        pc.and_(is_(["FORK", "JOIN", "CLONE"]), pc.equal(pc.add(parents, children), 0)),
        "a FORK/JOIN/CLONE event needs at least one parent or child (parent_uuids/child_uuids)",
        t,
    )
    _first_bad(
        pc.and_(is_(["REPLAY"]), pc.or_(pc.not_equal(parents, 1), pc.not_equal(children, 1))),
        "a REPLAY event needs exactly one parent and one child (parent_uuids/child_uuids)",
        t,
    )


def assign_ids(table: pa.Table, first_id: int) -> pa.Table:
    # first_id, first_id + 1, ...: a running sum of ones in one kernel, in C (from a Python
    # range the same array costs ~100 times more).
    ones = pa.repeat(pa.scalar(1, pa.int64()), table.num_rows)
    ids = pc.cumulative_sum(ones, start=pa.scalar(first_id - 1, pa.int64()))
    return table.set_column(0, "event_id", ids)
