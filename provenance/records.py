"""Strict, typed validation of event records (dicts, JSON lines, NiFi's export) with pydantic.

Every field is type-checked before NiFi's own rules run: ints are ints (not `true`, not
`"12"`, not 1.5) within the 64-bit range of their column, lists are lists of strings (a string
is refused, not split into characters), attribute maps are string -> string. An error names
the field, so `ingest` can name the line too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from storage.timeutil import iso_to_ms

from .errors import InvalidEvent
from .event import ProvenanceEvent, now_ms, problem
from .schema import check_events, events_to_table

INT64_MAX = 2**63 - 1
Int64 = Annotated[int, Field(ge=-(2**63), le=INT64_MAX)]
Size = Annotated[int, Field(ge=0, le=INT64_MAX)]
#: Epoch milliseconds (UTC) or an ISO-8601 time (no zone = UTC), converted to milliseconds.
Time = Int64 | str
Uuids = list[str] | tuple[str, ...]
#: NiFi reports a removed attribute with a null value in `updatedAttributes`: kept as null.
Attributes = dict[str, str | None]


class EventRecord(BaseModel):
    """One event as a record with the SQL view's field names (see ProvenanceEvent)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    event_type: str = ""
    flowfile_uuid: str = ""
    component_id: str = ""
    component_type: str = ""
    file_size: Size | None = None
    event_time: Time | None = None
    event_id: Int64 | None = None  # accepted and ignored: the repository assigns ids
    lineage_start_date: Time | None = None
    event_duration_ms: Int64 | None = None
    previous_file_size: Size | None = None
    transit_uri: str | None = None
    source_system_flowfile_identifier: str | None = None
    alternate_identifier_uri: str | None = None
    details: str | None = None
    relationship: str | None = None
    source_queue_identifier: str | None = None
    parent_uuids: Uuids | None = None
    child_uuids: Uuids | None = None
    previous_attributes: Attributes | None = None
    updated_attributes: Attributes | None = None
    content_claim_container: str | None = None
    content_claim_section: str | None = None
    content_claim_identifier: str | None = None
    content_claim_offset: Size | None = None
    previous_content_claim_container: str | None = None
    previous_content_claim_section: str | None = None
    previous_content_claim_identifier: str | None = None
    previous_content_claim_offset: Size | None = None
    content_claim_checksum: str | None = None
    previous_content_claim_checksum: str | None = None
    source_fields: dict[str, str] | None = None

    @field_validator("event_time", "lineage_start_date")
    @classmethod
    def _ms(cls, value: int | str | None) -> int | None:
        return value if value is None or isinstance(value, int) else iso_ms(value)


class NifiExtras(BaseModel):
    """Fields of NiFi's site-to-site provenance record that have no column of the view: kept,
    as strings, in the extension column `source_fields` (keyed by NiFi's field name)."""

    model_config = ConfigDict(strict=True, frozen=True)

    eventId: str | None = None
    eventOrdinal: Int64 | None = None
    timestamp: str | None = None
    componentName: str | None = None
    processGroupId: str | None = None
    processGroupName: str | None = None
    entityType: str | None = None
    actorHostname: str | None = None
    contentURI: str | None = None
    previousContentURI: str | None = None
    platform: str | None = None
    application: str | None = None


def iso_ms(value: str) -> int:
    try:
        return iso_to_ms(value)
    except ValueError:
        raise ValueError(
            f"expected epoch milliseconds or an ISO-8601 time, got {value!r}"
        ) from None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(exc: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """One line: `<field>: <what is wrong> (got <value>)` for the first error."""
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"] if p not in ("int", "str", "list[str]", "tuple[str, ...]")]
    field = loc[0] if loc else "?"
    field = (names or {}).get(field, field)
    where = field + "".join(f"[{p!r}]" for p in loc[1:2]) if len(loc) > 1 else field
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown field"
    if err["type"] == "missing":
        return f"{where}: required"
    return f"{where}: {msg} (got {_short(err.get('input'))})"


def record(data: Mapping[str, Any]) -> EventRecord:
    """Validate a record (types, then NiFi's rules); InvalidEvent names the field."""
    try:
        rec = EventRecord.model_validate(data)
    except ValidationError as exc:
        raise InvalidEvent(describe(exc)) from None
    why = problem(rec)
    if why is not None:
        raise InvalidEvent(why)
    return rec


def row(rec: EventRecord, event_time: int) -> dict[str, Any]:
    """The record as a row of SCHEMA (defaults filled as ProvenanceEvent fills them)."""
    out = dict(rec.__dict__)
    out["event_id"] = None
    if out["event_time"] is None:
        out["event_time"] = event_time
    if out["event_duration_ms"] is None:
        out["event_duration_ms"] = -1
    for name in ("parent_uuids", "child_uuids"):
        out[name] = list(out[name] or ())
    for name in ("previous_attributes", "updated_attributes", "source_fields"):
        out[name] = out[name] or {}
    return out


def to_event(data: Mapping[str, Any] | ProvenanceEvent) -> ProvenanceEvent:
    """A ProvenanceEvent from a dict (or an event), type-checked and validated as NiFi does."""
    if isinstance(data, ProvenanceEvent):
        event = data
        data = event.to_dict()
    else:
        event = None
    rec = record(data)
    if event is not None:
        return event
    return ProvenanceEvent(**row(rec, now_ms()) | {"event_id": -1})


def validate(events: Iterable[ProvenanceEvent | Mapping[str, Any]]) -> list[ProvenanceEvent]:
    """All events (dicts are converted), or InvalidEvent for the first bad one: a batch is
    all or nothing, and the message names the event's position and the field."""
    out = []
    for i, item in enumerate(events):
        try:
            out.append(to_event(item))
        except InvalidEvent as exc:
            uuid = item.get("flowfile_uuid") if isinstance(item, Mapping) else item.flowfile_uuid
            raise InvalidEvent(f"event #{i} of the batch (FlowFile {uuid or '?'}): {exc}") from None
        except (TypeError, AttributeError) as exc:
            raise InvalidEvent(f"event #{i} of the batch: {exc}") from None
    return out


def to_table(
    events: Iterable[ProvenanceEvent | Mapping[str, Any]], max_attribute_length: int
) -> pa.Table:
    """A validated batch in columnar form, all or nothing. A batch of ProvenanceEvents is
    checked column by column (types, then NiFi's rules, vectorized); only a batch that fails
    (or holds dicts) is validated record by record, so the error names the event and field."""
    items = events if isinstance(events, list) else list(events)
    if set(map(type, items)) == {ProvenanceEvent}:  # one C-level pass
        try:
            table = events_to_table(items, max_attribute_length)  # type: ignore[arg-type]
            check_events(table)
            return table
        except InvalidEvent:
            pass  # find the first bad event below, with the message the record check gives
    return events_to_table(validate(items), max_attribute_length)
