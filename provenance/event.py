"""NiFi's `ProvenanceEventRecord` in snake_case, its 18 event types and NiFi's validation."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NoReturn, Protocol

from storage import timeutil

from .errors import InvalidEvent


class EventType(StrEnum):
    CREATE = "CREATE"
    RECEIVE = "RECEIVE"
    FETCH = "FETCH"
    SEND = "SEND"
    UPLOAD = "UPLOAD"
    REMOTE_INVOCATION = "REMOTE_INVOCATION"
    DOWNLOAD = "DOWNLOAD"
    DROP = "DROP"
    EXPIRE = "EXPIRE"
    FORK = "FORK"
    JOIN = "JOIN"
    CLONE = "CLONE"
    CONTENT_MODIFIED = "CONTENT_MODIFIED"
    ATTRIBUTES_MODIFIED = "ATTRIBUTES_MODIFIED"
    ROUTE = "ROUTE"
    ADDINFO = "ADDINFO"
    REPLAY = "REPLAY"
    UNKNOWN = "UNKNOWN"


EVENT_TYPES = frozenset(t.value for t in EventType)
NEEDS_TRANSIT_URI = frozenset({"RECEIVE", "FETCH", "SEND", "UPLOAD"})
LINKING = frozenset({"FORK", "JOIN", "CLONE", "REPLAY"})
UNASSIGNED = -1


def now_ms() -> int:
    return timeutil.now_ms()


_UNSET: Any = object()
#: The default of the three maps: one shared, read-only empty mapping.
_EMPTY: Mapping[str, str] = MappingProxyType({})
_new = tuple.__new__


@dataclass(frozen=True, eq=False, init=False)
class ProvenanceEvent(tuple[Any, ...]):
    """One provenance event. Times are epoch milliseconds (UTC), like NiFi's longs.

    `event_id` is -1 until the repository assigns one when the event's journal is flushed.
    Equality ignores the order of parent and child UUIDs (NiFi keeps them as sets).
    Construction only stores the values (a list of UUIDs becomes a tuple, maps are copied);
    their types and NiFi's rules are checked when the events are registered (columnar, per
    batch) or by `from_dict`.

    A frozen dataclass (`fields`, `replace`, `asdict` work) stored as a tuple of its values
    in the storage schema's column order (schema.COLUMNS): building one is a single
    allocation, and a batch transposes into columns in C. Indexing, iterating or comparing
    it as a tuple is not part of its API.
    """

    __slots__ = ()

    event_type: str
    flowfile_uuid: str
    component_id: str
    component_type: str
    file_size: int
    event_time: int = field(default_factory=now_ms)
    event_id: int = UNASSIGNED
    lineage_start_date: int | None = None
    event_duration_ms: int = -1
    previous_file_size: int | None = None
    transit_uri: str | None = None
    source_system_flowfile_identifier: str | None = None
    alternate_identifier_uri: str | None = None
    details: str | None = None
    relationship: str | None = None
    source_queue_identifier: str | None = None
    parent_uuids: tuple[str, ...] = ()
    child_uuids: tuple[str, ...] = ()
    previous_attributes: Mapping[str, str] = field(default_factory=dict)
    updated_attributes: Mapping[str, str] = field(default_factory=dict)
    content_claim_container: str | None = None
    content_claim_section: str | None = None
    content_claim_identifier: str | None = None
    content_claim_offset: int | None = None
    previous_content_claim_container: str | None = None
    previous_content_claim_section: str | None = None
    previous_content_claim_identifier: str | None = None
    previous_content_claim_offset: int | None = None
    #: Not in the SQL view: lets replay read (and verify) the content it points to.
    content_claim_checksum: str | None = None
    previous_content_claim_checksum: str | None = None
    #: Extension column: fields of the source record that have no column (NiFi's eventId,
    #: componentName, processGroupId, ... from its site-to-site export), as strings.
    source_fields: Mapping[str, str] = field(default_factory=dict)

    # Written out rather than generated, and doing the least per event (building events was
    # half of a per-event ingest's wall time, benchmarks.md): explicit parameters bind
    # fastest, the maps are copied only when given, and one tuple holds every field. A
    # dict per event (the dataclass default) was a second object for the cyclic garbage
    # collector to track: its runs took a fifth of a per-event ingest. Types and NiFi's
    # rules are checked per batch when the events are registered.
    def __new__(
        cls,
        event_type: str,
        flowfile_uuid: str,
        component_id: str,
        component_type: str,
        file_size: int,
        event_time: int = _UNSET,
        event_id: int = UNASSIGNED,
        lineage_start_date: int | None = None,
        event_duration_ms: int = -1,
        previous_file_size: int | None = None,
        transit_uri: str | None = None,
        source_system_flowfile_identifier: str | None = None,
        alternate_identifier_uri: str | None = None,
        details: str | None = None,
        relationship: str | None = None,
        source_queue_identifier: str | None = None,
        parent_uuids: Iterable[str] = (),
        child_uuids: Iterable[str] = (),
        previous_attributes: Mapping[str, str] = _EMPTY,
        updated_attributes: Mapping[str, str] = _EMPTY,
        content_claim_container: str | None = None,
        content_claim_section: str | None = None,
        content_claim_identifier: str | None = None,
        content_claim_offset: int | None = None,
        previous_content_claim_container: str | None = None,
        previous_content_claim_section: str | None = None,
        previous_content_claim_identifier: str | None = None,
        previous_content_claim_offset: int | None = None,
        content_claim_checksum: str | None = None,
        previous_content_claim_checksum: str | None = None,
        source_fields: Mapping[str, str] = _EMPTY,
    ) -> ProvenanceEvent:
        if type(event_type) is not str and isinstance(event_type, EventType):
            event_type = event_type.value
        if type(parent_uuids) is not tuple:
            parent_uuids = _uuids("parent_uuids", parent_uuids)
        if type(child_uuids) is not tuple:
            child_uuids = _uuids("child_uuids", child_uuids)
        # Private copies: the caller's maps may change after the event is built.
        if previous_attributes is not _EMPTY:
            previous_attributes = dict(previous_attributes)
        if updated_attributes is not _EMPTY:
            updated_attributes = dict(updated_attributes)
        if source_fields is not _EMPTY:
            source_fields = dict(source_fields)
        return _new(
            cls,
            (
                event_id,
                now_ms() if event_time is _UNSET else event_time,
                event_type,
                flowfile_uuid,
                lineage_start_date,
                event_duration_ms,
                file_size,
                previous_file_size,
                component_id,
                component_type,
                transit_uri,
                source_system_flowfile_identifier,
                alternate_identifier_uri,
                details,
                relationship,
                source_queue_identifier,
                parent_uuids,
                child_uuids,
                previous_attributes,
                updated_attributes,
                content_claim_container,
                content_claim_section,
                content_claim_identifier,
                content_claim_offset,
                previous_content_claim_container,
                previous_content_claim_section,
                previous_content_claim_identifier,
                previous_content_claim_offset,
                content_claim_checksum,
                previous_content_claim_checksum,
                source_fields,
            ),
        )

    # -- NiFi semantics --------------------------------------------------------------------
    @property
    def attributes(self) -> dict[str, str]:
        """The FlowFile's attributes after the event: previous overlaid with updated."""
        merged = dict(self.previous_attributes)
        merged.update(self.updated_attributes)
        return merged

    def with_id(self, event_id: int) -> ProvenanceEvent:
        return replace(self, event_id=event_id)

    def _key(self) -> tuple[Any, ...]:
        values = []
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("parent_uuids", "child_uuids"):
                v = tuple(sorted(v))
            elif isinstance(v, Mapping):
                v = tuple(sorted(v.items()))
            values.append(v)
        return tuple(values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProvenanceEvent):
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self._key())

    # Events are not ordered (a dataclass without order=True), whatever tuples do.
    def __lt__(self, other: object) -> NoReturn:
        raise TypeError("ProvenanceEvent instances are not ordered")

    __le__ = __gt__ = __ge__ = __lt__

    def __reduce__(self) -> tuple[Any, tuple[tuple[Any, ...]]]:
        return _from_values, (tuple(self),)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = (
                list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, Mapping) else v)
            )
        return out


#: Fields in storage order (the order of the tuple), each read by a C-level getter.
STORAGE_ORDER = (
    "event_id", "event_time", "event_type", "flowfile_uuid", "lineage_start_date",
    "event_duration_ms", "file_size", "previous_file_size", "component_id", "component_type",
    "transit_uri", "source_system_flowfile_identifier", "alternate_identifier_uri", "details",
    "relationship", "source_queue_identifier", "parent_uuids", "child_uuids",
    "previous_attributes", "updated_attributes", "content_claim_container",
    "content_claim_section", "content_claim_identifier", "content_claim_offset",
    "previous_content_claim_container", "previous_content_claim_section",
    "previous_content_claim_identifier", "previous_content_claim_offset",
    "content_claim_checksum", "previous_content_claim_checksum", "source_fields",
)  # fmt: skip


def _add_getters() -> None:
    """Each field read from its place in the tuple (replacing the dataclass defaults)."""
    for i, name in enumerate(STORAGE_ORDER):
        setattr(ProvenanceEvent, name, property(operator.itemgetter(i), doc=name))
    assert {f.name for f in fields(ProvenanceEvent)} == set(STORAGE_ORDER)


_add_getters()


def _from_values(values: tuple[Any, ...]) -> ProvenanceEvent:
    """An event from its values in storage order (unpickling, copying)."""
    return _new(ProvenanceEvent, values)


def _uuids(name: str, value: Iterable[str]) -> tuple[str, ...]:
    if type(value) is tuple:
        return value
    if isinstance(value, str | bytes):  # never split a string into characters
        raise InvalidEvent(f"{name}: expected a list of strings, got a string {value!r}")
    return tuple(value)


class EventLike(Protocol):
    """What NiFi's rules look at (a ProvenanceEvent or a validated record)."""

    @property
    def event_type(self) -> str: ...
    @property
    def flowfile_uuid(self) -> str: ...
    @property
    def component_id(self) -> str: ...
    @property
    def component_type(self) -> str: ...
    @property
    def file_size(self) -> int | None: ...
    @property
    def transit_uri(self) -> str | None: ...
    @property
    def relationship(self) -> str | None: ...
    @property
    def alternate_identifier_uri(self) -> str | None: ...
    @property
    def parent_uuids(self) -> Iterable[str] | None: ...
    @property
    def child_uuids(self) -> Iterable[str] | None: ...


def problem(event: EventLike) -> str | None:
    """Why NiFi's `StandardProvenanceEventRecord.Builder.build()` would refuse this event."""
    et = event.event_type
    if not et:
        return "Event Type (event_type) must be set"
    if et not in EVENT_TYPES:
        return f"event_type {et!r} is not one of NiFi's event types"
    for name, label in (
        ("component_id", "Component ID"),
        ("component_type", "Component Type"),
        ("flowfile_uuid", "FlowFile UUID"),
    ):
        if not getattr(event, name):
            return f"{label} ({name}) must be set"
    if event.file_size is None:
        return "FlowFile Size (file_size) must be set"
    size = event.file_size
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 2**63:
        return f"file_size must be a non-negative 64-bit integer, not {size!r}"
    return _type_problem(
        et,
        event.transit_uri,
        event.relationship,
        event.alternate_identifier_uri,
        len(tuple(event.parent_uuids or ())),
        len(tuple(event.child_uuids or ())),
    )


def _type_problem(
    et: str,
    transit_uri: str | None,
    relationship: str | None,
    alternate_identifier_uri: str | None,
    parents: int,
    children: int,
) -> str | None:
    if et in NEEDS_TRANSIT_URI and not transit_uri:
        return f"Transit URI (transit_uri) must be set for a {et} event"
    if et == "ROUTE" and not relationship:
        return "Relationship (relationship) must be set for a ROUTE event"
    if et == "ADDINFO" and not alternate_identifier_uri:
        return (
            "Alternate Identifier URI (alternate_identifier_uri) must be set for an ADDINFO event"
        )
    if et in ("FORK", "JOIN", "CLONE") and parents == 0 and children == 0:
        return f"a {et} event needs at least one parent or child (parent_uuids/child_uuids)"
    if et == "REPLAY" and (parents != 1 or children != 1):
        return "a REPLAY event needs exactly one parent and one child (parent_uuids/child_uuids)"
    return None
