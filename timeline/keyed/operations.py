"""The keyed-table operations behind `Table.insert/upsert/delete/changes` and the keyed
`insert_overwrite` (replacecommit of the partitions written, rows with their meta columns)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from storage import ObjectStore

from .. import predicate
from ..errors import MissingTableObject, TimelineError
from ..file_groups.sidecars import WRITE_STATS
from ..instant import COMMIT, REPLACE_COMMIT, Instant, parse_as_of
from ..parquet_io import release_unused_memory, return_large_blocks
from ..partitioning import split_partitions
from ..schema import merge_schemas
from ..table_schema import latest_schema
from ..writes import put_table
from .changes import cdc, incremental
from .compaction import service as compaction
from .index import bloom_ref
from .keys import META_COLUMNS, RECORD_KEY_COL, key_range, typed_keys
from .policies import OnDuplicate, TableType
from .properties import (
    PROPERTIES_KEY,
    KeyedProperties,
    PropertiesError,
    create_properties,
    load_properties,
)
from .write import (
    BatchSource,
    Filter,
    KeyedWriteRequest,
    WriteOperation,
    chained,
    insert_stream,
    prepare_batch,
    tables_of,
    write_keyed,
)

if TYPE_CHECKING:
    from pathlib import Path

    from .context import KeyedTable

#: The schema a new keyed table states in its creation commit: the meta columns. A write
#: through `Table.write` sees them in the latest schema and knows the table is keyed without
#: a request more than an unkeyed write makes.
META_SCHEMA = pa.schema([(c, pa.string()) for c in META_COLUMNS])


def create(table: KeyedTable, props: KeyedProperties) -> KeyedProperties:
    """Write the properties (create-only) and, for a new table, a creation commit (two
    creators racing may both write one: harmless, both state the same schema).

    The handle's own listing decides whether the table is new (a table is created right
    after it is opened, so no second LIST); when the properties were already there, another
    creator came first and the timeline is listed again before deciding on the commit."""
    existing = table.timeline(refresh=False).completed().write_timeline()
    latest = existing.last()
    if latest is not None and load_properties(table.store) is None:
        raise PropertiesError(
            f"table {table.uri} already holds unkeyed commits (the latest is "
            f"{latest.time}); a table is keyed from its creation: write the data "
            "into a new keyed table"
        )
    got, wrote = create_properties(table.store, props)
    if not wrote and not existing:
        existing = table.timeline().completed().write_timeline()
    if not existing:
        txn = table.begin(COMMIT, operation="create")
        try:
            txn.schema = META_SCHEMA
            txn.commit(details={"keyed": {"properties": props.to_json()}})
        except BaseException:
            txn.abort()
            raise
    return got


def is_keyed_schema(schema: pa.Schema | None) -> bool:
    return schema is not None and RECORD_KEY_COL in schema.names


def write(
    table: KeyedTable,
    props: KeyedProperties,
    data: pa.Table | Sequence[str | Path],
    mode: str,
    partition_by: Sequence[str] | str | None,
    extra: Mapping[str, str] | None,
) -> Instant:
    """`Table.write` on a keyed table: append is an upsert (Hudi's default operation);
    overwrite is insert_overwrite of the partitions written. Partitioning is the table's own."""
    parts = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
    if parts and tuple(parts) != props.partition_by:
        raise PropertiesError(
            f"{table.uri} is partitioned by {list(props.partition_by)} (a keyed table's "
            f"partitioning is fixed at creation), not {parts}"
        )
    if not isinstance(data, pa.Table):
        data = pa.concat_tables(
            [pq.ParquetFile(p).read(use_threads=False) for p in data],
            promote_options="default",
        )
    if mode == "overwrite":
        return insert_overwrite(table, props, data, extra)
    if mode != "append":
        raise ValueError(f"mode must be append or overwrite, not {mode!r}")
    return upsert(table, props, data, extra)


def _write(table: KeyedTable, req: KeyedWriteRequest) -> Instant:
    """One keyed write (keyed/write/client.py: copy-on-write rewrites file slices,
    merge-on-read appends log blocks in a delta commit); a merge-on-read table then compacts
    as the settings say (keyed/compaction/service.py)."""
    return_large_blocks()
    try:
        done = write_keyed(table, req)
        if req.merge_on_read:
            compaction.after_write(table)
        return done
    finally:
        release_unused_memory()


def upsert(
    table: KeyedTable,
    props: KeyedProperties,
    data: pa.Table,
    extra: Mapping[str, str] | None = None,
) -> Instant:
    return _write(
        table,
        KeyedWriteRequest(props, WriteOperation.UPSERT, data=data, metadata=dict(extra or {})),
    )


def insert(
    table: KeyedTable,
    props: KeyedProperties,
    data: pa.Table | BatchSource,
    on_duplicate: OnDuplicate | str = OnDuplicate.FAIL,
    extra: Mapping[str, str] | None = None,
) -> Instant:
    on_duplicate = OnDuplicate.parse(on_duplicate)
    if not isinstance(data, pa.Table):
        data = _one_table_or_stream(data)
    if not isinstance(data, pa.Table):
        # Written as it streams (keyed/write/stream.py).
        if props.table_type != TableType.MERGE_ON_READ:
            return_large_blocks()
            try:
                return insert_stream(table, props, data, on_duplicate, dict(extra or {}))
            finally:
                release_unused_memory()
        # A merge-on-read insert reads the stream whole and writes it as a table.
        data = pa.concat_tables(list(data))
    req = KeyedWriteRequest(
        props,
        WriteOperation.INSERT,
        data=data,
        on_duplicate=OnDuplicate.parse(on_duplicate),
        metadata=dict(extra or {}),
    )
    return _write(table, req)


def _one_table_or_stream(source: BatchSource) -> pa.Table | Iterator[pa.Table]:
    """A stream that ends after its first batch, as that batch: the table path holds no more
    than the stream path would and is faster (the whole batch at hand fills the small files
    at once). A longer stream, as its batches from the first (an empty one as itself)."""
    batches = tables_of(source)
    first = next(batches, None)
    if first is None:
        return source.schema.empty_table() if isinstance(source, pa.RecordBatchReader) else iter(())
    second = next(batches, None)
    if second is None:
        return first
    return chained([first, second], batches)


def _keys_table(keys: Any, props: KeyedProperties) -> pa.Table:
    if isinstance(keys, pa.Table):
        return keys
    values = list(keys)
    if values and isinstance(values[0], Mapping):
        return pa.Table.from_pylist(values)
    if len(props.record_key) != 1:
        raise PropertiesError(
            f"the record key has columns {list(props.record_key)}: pass the keys to delete as "
            "a pyarrow table or a list of dicts"
        )
    return pa.table({props.record_key[0]: values})


def _delete_schema(
    table: KeyedTable, props: KeyedProperties, keys: Any, where: Any
) -> pa.Schema | None:
    """The schema a delete's input is checked against. Keys need only the key columns' types,
    which the handle's last state already states once data was written (the write reads the
    table again after it begins), so they cost no request; a handle that has not seen the
    key columns yet, and a SQL predicate (any column may be new), look again."""
    if keys is None and not isinstance(where, str):
        return None
    if keys is not None:
        known = table.state(refresh=False).schema()
        if known is not None and set(props.record_key) <= set(known.names):
            return known
    return table.schema()


def delete(
    table: KeyedTable,
    props: KeyedProperties,
    keys: Any = None,
    where: Any = None,
    extra: Mapping[str, str] | None = None,
) -> Instant:
    if (keys is None) == (where is None):
        raise ValueError("delete takes keys or a filter (where=), exactly one of them")
    # Keys are cast, and a predicate checked, before the write begins: nothing is written
    # for input that cannot work.
    schema = _delete_schema(table, props, keys, where)
    deletes = None if keys is None else typed_keys(_keys_table(keys, props), schema, props)
    if isinstance(where, str):
        # Refused before anything is written: one expression over the table's columns
        # (parsed once here for every file the delete reads). A table no data was written
        # to yet has no columns to bind to (and no row to delete).
        if schema is None or set(schema.names) <= set(META_COLUMNS):
            where = predicate.parse(where)
        else:
            where = predicate.check(where, schema)
    req = KeyedWriteRequest(
        props, WriteOperation.DELETE, deletes=deletes, where=where, metadata=dict(extra or {})
    )
    return _write(table, req)


def insert_overwrite(
    table: KeyedTable,
    props: KeyedProperties,
    data: pa.Table,
    extra: Mapping[str, str] | None = None,
) -> Instant:
    """Replace the partitions the data holds (the whole table when unpartitioned)."""
    parts = list(props.partition_by)
    operation = "insert_overwrite" if parts else "insert_overwrite_table"
    txn = table.begin(REPLACE_COMMIT, operation=operation)
    try:
        batch = prepare_batch(data, props, txn.instant_time, upsert=True)
        st = table.state()
        txn.schema = merge_schemas(st.schema(), batch.rows.schema, table.uri)
        stats = []
        written = set()
        fpp = table.settings.bloom_fpp(props.table_type == TableType.MERGE_ON_READ)
        for partition, piece in split_partitions(batch.rows, parts, naming=props.partition_naming):
            f = put_table(txn, partition, piece)
            written.add(partition)
            lo, hi = key_range(piece)
            keys = piece.column(RECORD_KEY_COL)
            stats.append(
                {
                    "path": f.path,
                    "file_group": f.file_group,
                    "partition": partition,
                    "prev_commit": None,
                    "prev_path": None,
                    "inserts": piece.num_rows,
                    "updates": 0,
                    "deletes": 0,
                    "rows": piece.num_rows,
                    "bytes": f.size,
                    "min_key": lo,
                    "max_key": hi,
                    **bloom_ref(table.store, f.path, keys, fpp),
                }
            )
        current = {f.partition for f in st.snapshot().files}
        txn.replace_partitions(written if parts else current | written)
        return txn.commit(dict(extra or {}), {WRITE_STATS: stats})
    except BaseException:
        txn.abort()
        raise


def changes(
    table: KeyedTable,
    props: KeyedProperties,
    begin: str | None,
    end: str | None = None,
    *,
    cdc_rows: bool = False,
    full_scan: bool = False,
) -> pa.Table:
    if cdc_rows:
        if full_scan:
            raise ValueError("full_scan applies to incremental reads: CDC needs every slice")
        return cdc(table, props, begin, end)
    return incremental(table, props, begin, end, full_scan=full_scan)


#: `KeyedTableMethods._props` before the properties object was read.
UNREAD = object()


def _refuse_missing_properties(table: KeyedTable) -> None:
    """No properties object: an unkeyed table, unless its commits state the meta columns
    (a keyed table's creation commit writes them after the properties object). Then the
    object was lost, and a read without it would merge nothing (a merge-on-read table
    would answer from its base files alone): refused, naming the object."""
    if is_keyed_schema(latest_schema(table, refresh=False)):
        where = table.store.url(PROPERTIES_KEY)
        raise MissingTableObject(
            f"{where} is missing: {table.uri} is a keyed table (its commits hold the record "
            "key column) and its record key, merge mode and table type are in that object; "
            "`flowledger table check --repair` restores it from the creation commit",
            where,
        )


def keyed_properties(table: KeyedTable, what: str) -> KeyedProperties:
    """The table's keyed properties, or one line saying `what` needs a keyed table."""
    props = table.properties
    if props is None:
        raise TimelineError(
            f"{what} needs a keyed table and {table.store.uri} has no record key (create it "
            "with Table.create(store, KeyedProperties.of(...)) or `flowledger table create "
            "--record-key ...`)"
        )
    return props


class KeyedTableMethods:
    """`Table`'s keyed methods (docs/tables.md): its properties, upsert, insert, delete,
    incremental and CDC reads (compaction is `table.maintenance`'s). An unkeyed table refuses them
    with one line saying how to create a keyed table."""

    store: ObjectStore
    _props: Any  # KeyedProperties | None once read (they never change), else UNREAD

    def _table(self) -> KeyedTable:
        return cast("KeyedTable", self)

    @property
    def properties(self) -> KeyedProperties | None:
        """The keyed table's properties; None for an unkeyed table (one GET, once)."""
        if self._props is UNREAD:
            found = load_properties(self.store)
            if found is None:
                _refuse_missing_properties(self._table())
            self._props = found
        props: KeyedProperties | None = self._props
        return props

    def _keyed(self, what: str) -> KeyedProperties:
        return keyed_properties(self._table(), what)

    def upsert(self, data: pa.Table, extra_metadata: Mapping[str, str] | None = None) -> Instant:
        """Insert new records and update stored ones (merge mode decides), one commit."""
        return upsert(self._table(), self._keyed("upsert"), data, extra_metadata)

    def insert(
        self,
        data: pa.Table | BatchSource,
        on_duplicate: OnDuplicate | str = OnDuplicate.FAIL,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> Instant:
        """Insert new records; keys already stored fail the write (`fail`, nothing
        committed) or are skipped (`drop`). `data`: a table, or a stream of record batches
        (a `pyarrow.RecordBatchReader`, an iterable of batches) written as it is read
        without holding it whole (docs/tables.md, "Streamed inserts")."""
        props = self._keyed("insert")
        return insert(self._table(), props, data, on_duplicate, extra_metadata)

    def delete(
        self,
        keys: pa.Table | Sequence[Any] | None = None,
        *,
        where: Filter | None = None,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> Instant:
        """Delete records by key (a table of key columns, optionally the ordering field; a
        list of values for a single-column key; or dicts) or by a filter (`where`: a pyarrow
        compute expression, or a SQL predicate: one boolean expression over the table's
        columns, evaluated in the SQL sandbox; anything else is `InvalidPredicate`). Missing
        keys are ignored."""
        return delete(self._table(), self._keyed("delete"), keys, where, extra_metadata)

    def changes(
        self,
        begin: str | None,
        end: str | None = None,
        *,
        cdc: bool = False,
        full_scan: bool = False,
    ) -> pa.Table:
        """Records changed in (begin, end] by completion order: their latest state, or with
        `cdc` one row per change (op i/u/d, before and after images, instant)."""
        props = self._keyed("changes")
        if begin is not None:
            begin = parse_as_of(begin, "begin")
        if end is not None:
            end = parse_as_of(end, "end")
        return changes(self._table(), props, begin, end, cdc_rows=cdc, full_scan=full_scan)


class KeyedCompaction:
    """Merge-on-read compaction of one table, as `table.maintenance` offers it (handed in:
    timeline/maintenance.py knows nothing of keys). An unkeyed table refuses it."""

    def __init__(self, table: KeyedTable) -> None:
        self.table = table

    def compact(self, *, force: bool = True) -> Instant | None:
        keyed_properties(self.table, "compact")
        return_large_blocks()
        try:
            return compaction.compact(self.table, force=force)
        finally:
            release_unused_memory()

    def schedule(self, *, force: bool = True) -> str | None:
        keyed_properties(self.table, "compact")
        return compaction.schedule(self.table, force=force)

    def run(self, instant_time: str | None = None) -> list[str]:
        if instant_time is not None:
            done = compaction.execute(self.table, instant_time)
            return [instant_time] if done is not None else []
        return compaction.run_pending(self.table)


__all__: Sequence[str] = [
    "META_SCHEMA",
    "UNREAD",
    "KeyedCompaction",
    "KeyedTableMethods",
    "changes",
    "create",
    "delete",
    "insert",
    "insert_overwrite",
    "is_keyed_schema",
    "keyed_properties",
    "upsert",
    "write",
]
