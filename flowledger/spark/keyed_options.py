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

from timeline import (
    KeyedProperties,
    KeyScope,
    MergeMode,
    OnDuplicate,
    Table,
    TableType,
    WriteOperation,
    make_keyed,
)

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
#: Hudi's merge-mode names (1.x) -> flowledger's.
MERGE_MODES: Mapping[str, MergeMode] = MappingProxyType(
    {
        **{m.value: m for m in MergeMode},
        "commit_time_ordering": MergeMode.COMMIT_TIME,
        "event_time_ordering": MergeMode.EVENT_TIME,
    }
)
#: Hudi's index types -> key scope: global indexes keep a key unique in the whole table.
KEY_SCOPES: Mapping[str, KeyScope] = MappingProxyType(
    {
        **{s.value: s for s in KeyScope},
        "global_bloom": KeyScope.GLOBAL,
        "global_simple": KeyScope.GLOBAL,
        "record_index": KeyScope.GLOBAL,
        "bloom": KeyScope.PARTITION,
        "simple": KeyScope.PARTITION,
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
    on_duplicate: OnDuplicate = OnDuplicate.FAIL  # what an insert does with a stored key

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
        dup = OnDuplicate.parse(option(options, "onDuplicate") or OnDuplicate.FAIL, "onDuplicate")
    except ValueError as e:
        raise SparkWriteError(str(e)) from None
    return KeyedOptions(operation, dup)


def requested_properties(options: Mapping[str, str]) -> KeyedProperties | None:
    """The table properties the options state (None when they give no record key)."""
    key = option(options, "recordKey")
    if not key:
        return None
    mode = (option(options, "mergeMode") or MergeMode.COMMIT_TIME).strip().lower()
    scope = (option(options, "keyScope") or KeyScope.GLOBAL).strip().lower()
    if mode not in MERGE_MODES:
        raise SparkWriteError(f"mergeMode must be one of {', '.join(MERGE_MODES)}, not {mode!r}")
    if scope not in KEY_SCOPES:
        raise SparkWriteError(f"keyScope must be one of {', '.join(KEY_SCOPES)}, not {scope!r}")
    try:
        table_type = TableType.parse(option(options, "tableType") or "copy_on_write", "tableType")
    except ValueError as e:
        raise SparkWriteError(str(e)) from None
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
    already holding them is the check, with no second read of it).

    A table whose listing (made when it was opened) shows no instant is new: it is made
    keyed on the handle already open (`timeline.make_keyed`), without first reading properties
    it cannot have yet and without opening it again, so a session's first write into a new
    table makes the requests `Table.create` makes and no more. (A creator that crashed
    between its properties and its creation commit left properties behind: `make_keyed`
    reads and checks those.) Properties other than the table's are refused there too."""
    wanted = requested_properties(options)
    if wanted is not None and (_listed_empty(table) or wanted != table.properties):
        make_keyed(table, wanted)
    props = table.properties
    if props is None:
        raise SparkWriteError(
            f"{table.uri} is not a keyed table: give the record key with "
            ".option('recordKey', ...) (hoodie.datasource.write.recordkey.field)"
        )
    return table, props


def _listed_empty(table: Table) -> bool:
    """Whether the table's last listing held no instant at all (no request)."""
    timeline, completed = table.instants.known_timeline()
    return not timeline.instants and not completed
