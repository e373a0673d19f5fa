"""Reading events from files: JSON lines with the view's field names, or NiFi's own
provenance JSON as its SiteToSiteProvenanceReportingTask sends it (a JSON array, or one
record per line), so NiFi history can be brought in."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import IO, Any

from .errors import IngestError, InvalidEvent
from .event import ProvenanceEvent, problem

#: NiFi's site-to-site provenance record field -> our field.
NIFI_FIELDS = {
    "eventType": "event_type",
    "timestampMillis": "event_time",
    "durationMillis": "event_duration_ms",
    "lineageStart": "lineage_start_date",
    "details": "details",
    "componentId": "component_id",
    "componentType": "component_type",
    "entityId": "flowfile_uuid",
    "entitySize": "file_size",
    "previousEntitySize": "previous_file_size",
    "updatedAttributes": "updated_attributes",
    "previousAttributes": "previous_attributes",
    "parentIds": "parent_uuids",
    "childIds": "child_uuids",
    "transitUri": "transit_uri",
    "alternateIdentifier": "alternate_identifier_uri",
    "remoteIdentifier": "source_system_flowfile_identifier",
    "relationship": "relationship",
    "sourceQueueIdentifier": "source_queue_identifier",
}
#: Carried by NiFi's export but with no column here (the NiFi event id is reassigned).
NIFI_DROPPED = {
    "eventId",
    "eventOrdinal",
    "timestamp",
    "componentName",
    "processGroupId",
    "processGroupName",
    "entityType",
    "actorHostname",
    "contentURI",
    "previousContentURI",
    "platform",
    "application",
}
TIME_FIELDS = ("event_time", "lineage_start_date")


def is_nifi(record: Mapping[str, Any]) -> bool:
    return "eventType" in record and ("entityId" in record or "eventOrdinal" in record)


def _ms(value: Any, field: str) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    raise InvalidEvent(f"{field}: expected epoch milliseconds or an ISO-8601 time, got {value!r}")


def from_nifi(record: Mapping[str, Any]) -> ProvenanceEvent:
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key in NIFI_FIELDS:
            out[NIFI_FIELDS[key]] = value
        elif key not in NIFI_DROPPED:
            raise InvalidEvent(f"unknown NiFi provenance field {key!r}")
    if "event_time" not in out and record.get("timestamp"):
        out["event_time"] = record["timestamp"]
    # NiFi's export has no relationship: keep ROUTE events importable and say so.
    if out.get("event_type") == "ROUTE" and not out.get("relationship"):
        out["relationship"] = "(not in NiFi export)"
    return from_record(out)


def from_record(record: Mapping[str, Any]) -> ProvenanceEvent:
    data = dict(record)
    for field in TIME_FIELDS:
        if field in data:
            data[field] = _ms(data[field], field)
    event = ProvenanceEvent.from_dict(data)
    why = problem(event)
    if why is not None:
        raise InvalidEvent(why)
    return event


def read_events(stream: IO[str]) -> Iterator[ProvenanceEvent]:
    """Events of a JSON-lines file (ours or NiFi's) or a JSON array (NiFi's export)."""
    head = stream.read(1)
    while head and head.isspace():
        head = stream.read(1)
    if head == "[":
        try:
            records = json.loads(head + stream.read())
        except ValueError as exc:
            raise IngestError(f"not a JSON array of provenance records: {exc}") from exc
        for i, rec in enumerate(records, 1):
            yield _one(rec, f"record {i}")
        return
    for n, line in enumerate(_lines(head, stream), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise IngestError(f"line {n}: not JSON: {exc}") from exc
        yield _one(rec, f"line {n}")


def _lines(head: str, stream: IO[str]) -> Iterator[str]:
    first = head + stream.readline()
    yield first
    yield from stream


def _one(rec: Any, where: str) -> ProvenanceEvent:
    if not isinstance(rec, dict):
        raise IngestError(f"{where}: expected a JSON object")
    try:
        return from_nifi(rec) if is_nifi(rec) else from_record(rec)
    except InvalidEvent as exc:
        raise IngestError(f"{where}: {exc}") from exc
    except TypeError as exc:
        raise IngestError(f"{where}: {exc}") from exc
