"""A table's schema: recorded in commit metadata, checked on every write, applied on read.

Every write through `Table.write` records the table's (merged) Arrow schema under the commit
metadata key `schema` in a stable JSON form, so the latest write states it. A new file must
match it up to the documented evolution (docs/timeline-protocol.md, "Schema"):

- new columns, if nullable (older files read them as nulls);
- columns the file leaves out, if nullable in the table (read as nulls);
- widening: int8 -> int16 -> int32 -> int64, float32 -> float64 (narrower values are
  written as they are and cast up on read); a column whose type is `null` (all empty) takes
  the first real type it meets, and a `null` column in a file fits any table column.

Anything else is a `SchemaMismatch` naming the columns with the table's and the file's types.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from .errors import CorruptTimelineObject, SchemaMismatch

SCHEMA_KEY = "schema"
_INTS = (pa.int8(), pa.int16(), pa.int32(), pa.int64())
_FLOATS = (pa.float32(), pa.float64())


# -- stable JSON form ---------------------------------------------------------------------------
def _type_to_json(t: pa.DataType) -> Any:
    if isinstance(t, pa.DictionaryType):
        return _type_to_json(t.value_type)  # an encoding, not a type of its own
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        kind = "list" if pa.types.is_list(t) else "large_list"
        return {kind: _field_to_json(t.value_field)}
    if pa.types.is_map(t):
        return {"map": [_type_to_json(t.key_type), _field_to_json(t.item_field)]}
    if pa.types.is_struct(t):
        return {"struct": [_field_to_json(t.field(i)) for i in range(t.num_fields)]}
    if pa.types.is_timestamp(t):
        return {"timestamp": t.unit, "tz": t.tz}
    if pa.types.is_decimal(t):
        return {"decimal": [t.precision, t.scale], "bits": t.bit_width}
    try:
        if pa.type_for_alias(str(t)) == t:
            return str(t)
    except ValueError:
        pass
    # Anything rarer: Arrow's own IPC bytes (still stable, just not readable).
    ipc = pa.schema([pa.field("t", t)]).serialize().to_pybytes()
    return {"ipc": base64.b64encode(ipc).decode()}


def _type_from_json(d: Any) -> pa.DataType:
    if isinstance(d, str):
        return pa.type_for_alias(d)
    if "list" in d:
        return pa.list_(_field_from_json(d["list"]))
    if "large_list" in d:
        return pa.large_list(_field_from_json(d["large_list"]))
    if "map" in d:
        item = _field_from_json(d["map"][1])
        return pa.map_(_type_from_json(d["map"][0]), item)
    if "struct" in d:
        return pa.struct([_field_from_json(f) for f in d["struct"]])
    if "timestamp" in d:
        return pa.timestamp(d["timestamp"], tz=d.get("tz"))
    if "decimal" in d:
        p, s = d["decimal"]
        return pa.decimal256(p, s) if d.get("bits") == 256 else pa.decimal128(p, s)
    if "ipc" in d:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(d["ipc"]))).field("t").type
    raise ValueError(f"unknown type {d!r}")


def _field_to_json(f: pa.Field) -> dict[str, Any]:
    return {"name": f.name, "type": _type_to_json(f.type), "nullable": f.nullable}


def _field_from_json(d: Mapping[str, Any]) -> pa.Field:
    return pa.field(str(d["name"]), _type_from_json(d["type"]), bool(d.get("nullable", True)))


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """The JSON form recorded under commit metadata key `schema` (field order kept)."""
    return {"fields": [_field_to_json(f) for f in schema]}


def schema_from_json(d: Mapping[str, Any]) -> pa.Schema:
    try:
        return pa.schema([_field_from_json(f) for f in d["fields"]])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CorruptTimelineObject(f"corrupt table schema in commit metadata: {exc}") from exc


def entry_schema(metadata: Mapping[str, Any]) -> pa.Schema | None:
    """The schema a commit's metadata states, if any."""
    d = metadata.get(SCHEMA_KEY)
    return schema_from_json(d) if isinstance(d, Mapping) else None


# -- checking -----------------------------------------------------------------------------------
def _plain(t: pa.DataType) -> pa.DataType:
    return t.value_type if isinstance(t, pa.DictionaryType) else t


def _merge_type(old: pa.DataType, new: pa.DataType) -> pa.DataType | None:
    """The column type after writing `new` values into an `old` column (None = refused)."""
    old, new = _plain(old), _plain(new)
    if old == new or pa.types.is_null(new):
        return old
    if pa.types.is_null(old):
        return new
    for ladder in (_INTS, _FLOATS):
        if old in ladder and new in ladder:
            return ladder[max(ladder.index(old), ladder.index(new))]
    return None


def _describe(f: pa.Field | None) -> str:
    if f is None:
        return "(missing)"
    return f"{_plain(f.type)}" + ("" if f.nullable else " not null")


def merge_schemas(table: pa.Schema | None, new: pa.Schema, where: str = "") -> pa.Schema:
    """The table's schema after a write of `new`; raises SchemaMismatch if it does not fit."""
    new = pa.schema([f.with_type(_plain(f.type)) for f in new])
    if table is None:
        return new
    problems: list[str] = []
    fields: list[pa.Field] = []
    for old in table:
        idx = new.get_field_index(old.name)
        got = new.field(idx) if idx >= 0 else None
        if got is None:
            if not old.nullable:
                problems.append(f"{old.name}: table has {_describe(old)}, file has (missing)")
            fields.append(old)
            continue
        merged = _merge_type(old.type, got.type)
        if merged is None:
            problems.append(f"{old.name}: table has {_describe(old)}, file has {_describe(got)}")
            continue
        fields.append(pa.field(old.name, merged, old.nullable or got.nullable))
    for f in new:
        if table.get_field_index(f.name) < 0:
            if not f.nullable:
                problems.append(
                    f"{f.name}: table has (missing), file has {_describe(f)} "
                    "(new columns must be nullable)"
                )
            fields.append(f)
    if problems:
        at = f" {where}" if where else ""
        raise SchemaMismatch(
            f"schema mismatch writing to{at}: " + "; ".join(problems),
            columns=[p.split(":", 1)[0] for p in problems],
        )
    return pa.schema(fields)


# -- applying on read -----------------------------------------------------------------------------
def conform(data: pa.Table, schema: pa.Schema, columns: Sequence[str] | None = None) -> pa.Table:
    """`data` (one file) in the table's schema: missing columns as nulls, widened types."""
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns if c in schema.names])
    target = schema
    arrays: list[pa.ChunkedArray | pa.Array] = []
    for f in target:
        if f.name in data.column_names:
            col = data.column(f.name)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.nulls(data.num_rows, f.type))
    fields = [f.with_nullable(True) for f in target]
    out = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    extra = [c for c in data.column_names if c not in target.names and columns is None]
    for c in extra:  # written before the schema was recorded: keep, never drop data
        out = out.append_column(c, data.column(c))
    return out


def no_rows(schema: pa.Schema | None, columns: Sequence[str] | None = None) -> pa.Table:
    """A read that found no file (every partition dropped, nothing left): no rows, but the
    columns and types of the table's schema, as a read of files would have them; no
    columns only when no commit ever stated a schema (a keyed table created and never
    written)."""
    if schema is None:
        return pa.table({})
    return conform(schema.empty_table(), schema, columns)
