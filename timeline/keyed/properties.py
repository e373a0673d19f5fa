"""A keyed table's properties (Hudi's `hoodie.properties`): fixed at creation in one
create-only, checksummed object, `_timeline/properties.json`.

A table without that object is unkeyed and behaves as it always did (append, overwrite).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from storage import Conflict, InvalidInputError, NotFound, ObjectStore, open_json, seal_json

from ..choice import Choice
from ..errors import TimelineError
from ..layout import TIMELINE
from ..partitioning import PartitionNaming, check_naming
from .policies import KeyScope, MergeMode, TableType

PROPERTIES_KEY = TIMELINE + "properties.json"
#: `/2` added `partition_naming`: an older version, which would name partitions the old way
#: in a table that escapes them, refuses the table instead. `/1` objects read as `legacy`.
FORMAT = "flowledger.table-properties/2"
FORMATS = ("flowledger.table-properties/1", FORMAT)
_C = TypeVar("_C", bound=Choice)


class PropertiesError(TimelineError, InvalidInputError, ValueError):
    """Invalid keyed-table properties, or properties that differ from the table's."""


@dataclass(frozen=True)
class KeyedProperties:
    """What makes a table keyed. Immutable once the table exists."""

    record_key: tuple[str, ...]
    ordering_field: str | None = None
    partition_by: tuple[str, ...] = ()
    merge_mode: MergeMode = MergeMode.COMMIT_TIME
    table_type: TableType = TableType.COPY_ON_WRITE
    #: `global` by default: a key names one record table-wide, as a primary key does in
    #: pyiceberg's upsert and Delta's MERGE, so an update may move a record between
    #: partitions. `partition` scopes keys to their partition (cheaper lookups: only the
    #: incoming partitions' files are candidates), as Hudi's non-global indexes do.
    key_scope: KeyScope = KeyScope.GLOBAL
    #: How partition values become path segments (`timeline.partitioning`): percent-escaped
    #: (`hive`) for every table created now; `legacy` for tables whose properties predate
    #: it (they keep their names). Not a choice a user makes, so not compared: opening an
    #: older table with the properties it was created with is not a change.
    partition_naming: PartitionNaming = field(default=PartitionNaming.HIVE, compare=False)

    def __post_init__(self) -> None:
        if not self.record_key or any(not c for c in self.record_key):
            raise PropertiesError("a keyed table needs at least one record key column")
        if len(set(self.record_key)) != len(self.record_key):
            raise PropertiesError(f"record key columns repeat: {list(self.record_key)}")
        # Names (as stored, or as a user gives them) are held as their members.
        object.__setattr__(self, "merge_mode", _parse(MergeMode, self.merge_mode))
        object.__setattr__(self, "table_type", _parse(TableType, self.table_type))
        object.__setattr__(self, "key_scope", _parse(KeyScope, self.key_scope))
        if self.merge_mode == MergeMode.EVENT_TIME and not self.ordering_field:
            raise PropertiesError("merge mode event_time needs an ordering field")
        object.__setattr__(self, "partition_naming", check_naming(self.partition_naming))

    @staticmethod
    def of(
        record_key: Sequence[str] | str,
        *,
        ordering_field: str | None = None,
        partition_by: Sequence[str] | str = (),
        merge_mode: MergeMode | str = MergeMode.COMMIT_TIME,
        table_type: TableType | str = TableType.COPY_ON_WRITE,
        key_scope: KeyScope | str = KeyScope.GLOBAL,
    ) -> KeyedProperties:
        """Properties from user input (a comma-separated string or a list of columns)."""
        return KeyedProperties(
            _columns(record_key),
            ordering_field or None,
            _columns(partition_by),
            _parse(MergeMode, merge_mode),
            _parse(TableType, table_type),
            _parse(KeyScope, key_scope),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "record_key": list(self.record_key),
            "ordering_field": self.ordering_field,
            "partition_by": list(self.partition_by),
            "merge_mode": self.merge_mode.value,
            "table_type": self.table_type.value,
            "key_scope": self.key_scope.value,
            "partition_naming": self.partition_naming,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> KeyedProperties:
        return KeyedProperties(
            tuple(d["record_key"]),
            d.get("ordering_field"),
            tuple(d.get("partition_by", ())),
            _parse(MergeMode, d.get("merge_mode", MergeMode.COMMIT_TIME)),
            _parse(TableType, d.get("table_type", TableType.COPY_ON_WRITE)),
            _parse(KeyScope, d.get("key_scope", KeyScope.GLOBAL)),
            # Properties written before the field existed: the names those tables hold.
            check_naming(str(d.get("partition_naming", PartitionNaming.LEGACY))),
        )

    def describe(self) -> str:
        order = f", ordering field {self.ordering_field}" if self.ordering_field else ""
        parts = f", partitioned by {','.join(self.partition_by)}" if self.partition_by else ""
        return (
            f"record key {','.join(self.record_key)}{order}{parts}, merge mode "
            f"{self.merge_mode}, {self.table_type}, {self.key_scope} keys"
        )


def _parse(choice: type[_C], name: object) -> _C:
    """`name` as a member of `choice`; a PropertiesError naming the values offered."""
    try:
        return choice.parse(name)
    except ValueError as e:
        raise PropertiesError(str(e)) from None


def _columns(cols: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(cols, str):
        cols = cols.split(",")
    return tuple(c.strip() for c in cols if c.strip())


def load_properties(store: ObjectStore) -> KeyedProperties | None:
    """The table's properties; None for an unkeyed table (one GET)."""
    try:
        data = store.get(PROPERTIES_KEY)
    except NotFound:
        return None
    d = open_json(data, store.url(PROPERTIES_KEY))
    if d.get("format") not in FORMATS:
        where = store.url(PROPERTIES_KEY)
        raise PropertiesError(f"{where}: unsupported format {d.get('format')!r}")
    try:
        return KeyedProperties.from_json(d)
    except PropertiesError as e:
        raise PropertiesError(f"{store.url(PROPERTIES_KEY)}: {e}") from None


def create_properties(store: ObjectStore, props: KeyedProperties) -> tuple[KeyedProperties, bool]:
    """Write the properties object once, and say whether this call wrote it. Creating again
    with the same properties is a no-op; with different ones it is refused (a table's key and
    merge mode never change)."""
    body = seal_json({"format": FORMAT, **props.to_json()})
    try:
        store.put_if_absent(PROPERTIES_KEY, body)
        return props, True
    except Conflict:
        pass
    existing = load_properties(store)
    if existing is None:  # pragma: no cover - deleted between the PUT and the GET
        raise PropertiesError(f"{store.uri}: properties object vanished while being created")
    if existing != props:
        raise PropertiesError(
            f"table {store.uri} already exists with {existing.describe()}; "
            f"it cannot change to {props.describe()}"
        )
    return existing, False
