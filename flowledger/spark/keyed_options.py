"""Writer options of keyed Spark writes, with Hudi's `hoodie.datasource.write.*` names.

    df.write.format("flowledger").option("operation", "upsert").option("recordKey", "id")

Each option is accepted under flowledger's short name or Hudi's name (docs/spark.md, "Keyed
tables"). Table properties (record key, ordering field, partitioning, merge mode, key scope,
table type) create the table keyed on its first write, as Hudi does; on an existing keyed
table they must be the ones it was created with (a different key is refused with one line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from timeline import KeyedProperties, Table, WriteOperation

from .errors import SparkWriteError

#: flowledger's option -> the Hudi Spark option naming the same thing.
HUDI_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "operation": ("hoodie.datasource.write.operation",),
        "recordKey": ("hoodie.datasource.write.recordkey.field", "hoodie.table.recordkey.fields"),
        "orderingField": (
            "precombineField",
            "hoodie.datasource.write.precombine.field",
            "hoodie.table.ordering.fields",
        ),
        "partitionBy": ("hoodie.datasource.write.partitionpath.field",),
        "mergeMode": ("hoodie.write.record.merge.mode", "hoodie.record.merge.mode"),
        "keyScope": ("hoodie.index.type",),
        "onDuplicate": ("hoodie.datasource.insert.dup.policy",),
        "tableType": ("hoodie.datasource.write.table.type", "hoodie.table.type"),
    }
)
#: Table types (Hudi's names, any case).
TABLE_TYPES = ("copy_on_write", "merge_on_read")
#: Property values (docs/tables.md, "Properties").
COMMIT_TIME, EVENT_TIME, GLOBAL, PARTITION = "commit_time", "event_time", "global", "partition"
#: Hudi's merge-mode names (1.x) -> flowledger's.
MERGE_MODES = MappingProxyType(
    {
        "commit_time": COMMIT_TIME,
        "commit_time_ordering": COMMIT_TIME,
        "event_time": EVENT_TIME,
        "event_time_ordering": EVENT_TIME,
    }
)
#: Hudi's index types -> key scope: global indexes keep a key unique in the whole table.
KEY_SCOPES = MappingProxyType(
    {
        "global": GLOBAL,
        "global_bloom": GLOBAL,
        "global_simple": GLOBAL,
        "record_index": GLOBAL,
        "partition": PARTITION,
        "bloom": PARTITION,
        "simple": PARTITION,
    }
)


def option(options: Mapping[str, str], name: str) -> str | None:
    """An option by flowledger's name (any case) or one of its Hudi names."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    for key in (name, *HUDI_NAMES.get(name, ())):
        if key.lower() in lowered:
            return lowered[key.lower()]
    return None


@dataclass(frozen=True)
class KeyedOptions:
    operation: WriteOperation
    on_duplicate: str = "fail"  # insert: fail or drop

    @property
    def upsert(self) -> bool:
        """Whether the write carries records (upsert, insert) rather than keys to delete."""
        return self.operation != WriteOperation.DELETE


def keyed_options(options: Mapping[str, str]) -> KeyedOptions | None:
    """The keyed operation the options ask for (None: a plain append or overwrite)."""
    op = (option(options, "operation") or "").strip().lower()
    if op in ("", "bulk_insert", "append"):
        return None
    try:
        operation = WriteOperation.parse(op, "the operation option")
    except ValueError as e:
        raise SparkWriteError(str(e)) from None
    dup = (option(options, "onDuplicate") or "fail").strip().lower()
    if dup not in ("fail", "drop"):
        raise SparkWriteError(
            f"onDuplicate must be fail or drop, not {dup!r} (writing duplicates of a key is not "
            "offered: a key would no longer name one record)"
        )
    return KeyedOptions(operation, dup)


def requested_properties(options: Mapping[str, str]) -> KeyedProperties | None:
    """The table properties the options state (None when they give no record key)."""
    key = option(options, "recordKey")
    if not key:
        return None
    mode = (option(options, "mergeMode") or COMMIT_TIME).strip().lower()
    scope = (option(options, "keyScope") or GLOBAL).strip().lower()
    if mode not in MERGE_MODES:
        raise SparkWriteError(f"mergeMode must be one of {sorted(MERGE_MODES)}, not {mode!r}")
    if scope not in KEY_SCOPES:
        raise SparkWriteError(f"keyScope must be one of {sorted(KEY_SCOPES)}, not {scope!r}")
    table_type = (option(options, "tableType") or TABLE_TYPES[0]).strip().lower()
    if table_type not in TABLE_TYPES:
        raise SparkWriteError(f"tableType must be one of {TABLE_TYPES}, not {table_type!r}")
    return KeyedProperties.of(
        key,
        ordering_field=option(options, "orderingField") or None,
        partition_by=option(options, "partitionBy") or (),
        merge_mode=MERGE_MODES[mode],
        key_scope=KEY_SCOPES[scope],
        table_type=table_type,
    )


def resolve_properties(table: Table, options: Mapping[str, str]) -> tuple[Table, KeyedProperties]:
    """The keyed table and its properties: created from the options on the first write
    (Hudi creates its table so), checked against them afterwards (the table as opened
    already holding them is the check, with no second read of it)."""
    wanted = requested_properties(options)
    if wanted is not None and wanted != table.properties:
        table = Table.create(table.store, wanted, table.settings)
    props = table.properties
    if props is None:
        raise SparkWriteError(
            f"{table.uri} is not a keyed table: give the record key with "
            ".option('recordKey', ...) (hoodie.datasource.write.recordkey.field)"
        )
    return table, props
