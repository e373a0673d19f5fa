"""Record keys, partition paths and the row meta columns of a keyed table.

Every row of a keyed table carries `_flowledger_commit_time` (the instant that last wrote
it) and `_flowledger_record_key` (its key as text), Hudi's `_hoodie_commit_time` and
`_hoodie_record_key`: a row version joins to the commit, and through it to provenance.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaMismatch
from ..partitioning import partition_column, partition_value
from .properties import KeyedProperties, PropertiesError

if TYPE_CHECKING:
    from ..metadata import DataFile

COMMIT_TIME_COL = "_flowledger_commit_time"
RECORD_KEY_COL = "_flowledger_record_key"
META_COLUMNS = (COMMIT_TIME_COL, RECORD_KEY_COL)


def record_keys(data: pa.Table, props: KeyedProperties) -> list[str]:
    """Each row's record key as text (`key_texts`); the one place key text is made, for
    every writer, index and reader."""
    missing = [c for c in props.record_key if c not in data.column_names]
    if missing:
        raise PropertiesError(f"record key column(s) {missing} not in the data's columns")
    cols: list[pa.Array] = []
    for c in props.record_key:
        col = data.column(c)
        if col.null_count:
            raise PropertiesError(f"record key column {c!r} has {col.null_count} null value(s)")
        if pa.types.is_integer(col.type) or pa.types.is_string(col.type):
            cols.append(pc.cast(col, pa.string()).combine_chunks())  # str(v), without a loop
        else:
            cols.append(pa.array([_text(v) for v in col.to_pylist()], pa.string()))
    return [str(k) for k in key_texts(props.record_key, cols).to_pylist()]


#: The escape character of a composite key's values (it escapes itself and the separator).
KEY_ESCAPE = "\\"
KEY_SEPARATOR = ","


def _escaped(values: pa.Array) -> pa.Array:
    doubled = pc.replace_substring(values, KEY_ESCAPE, KEY_ESCAPE * 2)
    return pc.replace_substring(doubled, KEY_SEPARATOR, KEY_ESCAPE + KEY_SEPARATOR)


def _joined(names: Sequence[str], values: Sequence[pa.Array]) -> pa.Array:
    parts: list[pa.Array | pa.Scalar] = []
    for i, (name, v) in enumerate(zip(names, values, strict=True)):
        parts += [pa.scalar(f"{KEY_SEPARATOR if i else ''}{name}:", pa.string()), v]
    return pc.binary_join_element_wise(*parts, "")


def key_texts(names: Sequence[str], values: Sequence[pa.Array]) -> pa.Array:
    """Record keys as text from each key column's values as text (aligned string arrays).

    One column: the value itself. Several: Hudi's complex key form `col1:v1,col2:v2`, which
    is ambiguous only when a value holds `,<key column>:` (`a='x,b:y', b='z'` and `a='x',
    b='y,b:z'` both read `a:x,b:y,b:z`). Such keys, and every key when a key column's name
    holds the escape character, have each value escaped instead (`\\` -> `\\\\`, `,` -> `\\,`):
    `a:x\\,b:y,b:z` and `a:x,b:y\\,b:z`. So distinct keys never share a text, and every
    key a table stored before this rule (all unambiguous ones) keeps its text. Why the two
    forms never meet: a plain text holds `,<key column>:` exactly at its separators; an
    escaped one also holds it inside the escaped value."""
    if len(values) == 1:
        return values[0]
    plain = _joined(names, values)
    escaped = _joined(names, [_escaped(v) for v in values])
    if any(KEY_ESCAPE in n for n in names):
        return escaped
    hits = [pc.match_substring(v, f"{KEY_SEPARATOR}{n}:") for v in values for n in names]
    return pc.if_else(reduce(pc.or_, hits), escaped, plain)


def typed_keys(deletes: pa.Table, schema: pa.Schema | None, props: KeyedProperties) -> pa.Table:
    """`deletes` with its key and ordering columns cast to the table's types: keys compare as
    typed values (1 given for a double key is the stored 1.0, a date given as text the stored
    date), as an upsert's must already match; a value that does not convert is refused."""
    if schema is None:
        return deletes
    wanted = [*props.record_key, *([props.ordering_field] if props.ordering_field else [])]
    for c in wanted:
        if c not in deletes.column_names or c not in schema.names:
            continue
        have, want = deletes.schema.field(c).type, schema.field(c).type
        if have == want:
            continue
        try:
            col = pc.cast(deletes.column(c), want)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SchemaMismatch(
                f"keys to delete: column {c} is {want} in the table, the keys given are {have} "
                f"and do not convert ({first})",
                [c],
            ) from None
        deletes = deletes.set_column(deletes.schema.get_field_index(c), c, col)
    return deletes


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.hex()
    if hasattr(v, "isoformat"):
        return str(v.isoformat())
    return str(v)


def partition_paths(data: pa.Table, props: KeyedProperties) -> list[str]:
    """Each row's Hive-style partition path (`col=value/...`), as unkeyed writes name them."""
    return [str(p) for p in partition_path_array(data, props).to_pylist()]


def partition_path_array(data: pa.Table, props: KeyedProperties) -> pa.Array:
    """`partition_paths` as an Arrow string array: each distinct value is named once and the
    names are taken by index, so a batch of millions of rows never becomes Python strings."""
    if not props.partition_by:
        return pa.repeat(pa.scalar("", pa.string()), data.num_rows)
    missing = [c for c in props.partition_by if c not in data.column_names]
    if missing:
        raise PropertiesError(f"partition column(s) {missing} not in the data's columns")
    named: list[pa.Array] = []
    naming = props.partition_naming
    for c in props.partition_by:
        encoded = pc.dictionary_encode(data.column(c)).combine_chunks()
        col = partition_column(c, naming)
        names = [f"{col}={partition_value(v, naming)}" for v in encoded.dictionary.to_pylist()]
        null_name = f"{col}={partition_value(None, naming)}"
        path = pa.array(names, pa.string()).take(encoded.indices)
        named.append(pc.fill_null(path, null_name) if path.null_count else path)
    if len(named) == 1:
        return named[0]
    return pc.binary_join_element_wise(*named, "/")


def integer_key_column(props: KeyedProperties | None, schema: pa.Schema | None) -> str | None:
    """The record key column when it is the table's only one and holds integers, else None:
    each row's record key is then that value as text (`record_keys`), so readers can match
    records by the numbers instead of hashing text."""
    if props is None or schema is None or len(props.record_key) != 1:
        return None
    (col,) = props.record_key
    if col in schema.names and pa.types.is_integer(schema.field(col).type):
        return col
    return None


def with_meta(data: pa.Table, instant_time: str, keys: Sequence[str] | pa.Array) -> pa.Table:
    """`data` with the meta columns first (replacing any the input carried)."""
    body = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
    n = body.num_rows
    meta = pa.table(
        {
            COMMIT_TIME_COL: pa.repeat(pa.scalar(instant_time, pa.string()), n),
            RECORD_KEY_COL: keys
            if isinstance(keys, pa.Array)
            else pa.array(list(keys), pa.string()),
        }
    )
    return pa.Table.from_arrays(
        [*meta.columns, *body.columns], names=[*meta.column_names, *body.column_names]
    )


def key_range(data: pa.Table | pa.ChunkedArray) -> tuple[str | None, str | None]:
    """Smallest and largest record key of a file's rows, or of its record keys (None, None
    when it is empty)."""
    keys = data.column(RECORD_KEY_COL) if isinstance(data, pa.Table) else data
    if len(keys) == 0:
        return None, None
    mm = pc.min_max(keys)
    return mm["min"].as_py(), mm["max"].as_py()


def keyed_files_check(schema: pa.Schema | None, added: Sequence[DataFile]) -> str | None:
    """Rows of a keyed table carry its meta columns; a writer that knows nothing of keys
    (an engine committing files it wrote) would add rows no key lookup finds. A table hands
    this to its commit path (`Table.commit_checks`)."""
    if schema is None or RECORD_KEY_COL not in schema.names:
        return None
    bare = [f for f in added if f.column_stats and RECORD_KEY_COL not in f.column_stats]
    if not bare:
        return None
    return (
        f"is a keyed table and {bare[0].path} has no {RECORD_KEY_COL} column: write to it "
        "with insert/upsert/delete (docs/tables.md), not as plain files"
    )
