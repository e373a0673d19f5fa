"""Events and lineage graphs in the JSON shapes of NiFi's REST API (camelCase DTOs)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from provenance import Lineage, ProvenanceEvent


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):  # beyond years 1-9999: no ISO-8601 text
        return None


def _claim(e: ProvenanceEvent, prefix: str) -> dict[str, Any] | None:
    ident = getattr(e, f"{prefix}content_claim_identifier")
    if not ident:
        return None
    return {
        "container": getattr(e, f"{prefix}content_claim_container"),
        "section": getattr(e, f"{prefix}content_claim_section"),
        "identifier": ident,
        "offset": getattr(e, f"{prefix}content_claim_offset"),
        "checksum": getattr(e, f"{prefix}content_claim_checksum"),
    }


def event_dto(
    e: ProvenanceEvent,
    available: tuple[bool, bool] | None = None,
    replay: str | None = None,
) -> dict[str, Any]:
    """NiFi's `ProvenanceEventDTO`. `available`: (input, output) content still readable —
    only computed for single-event requests (one HEAD each); `replay`: why replay is not
    possible (None: possible)."""
    before = dict(e.previous_attributes)
    after = e.attributes
    attrs = [
        {"name": k, "value": after.get(k), "previousValue": before.get(k)}
        for k in sorted(set(before) | set(after))
    ]
    out: dict[str, Any] = {
        "id": str(e.event_id),
        "eventId": e.event_id,
        "eventTime": iso(e.event_time),
        "eventType": e.event_type,
        "flowFileUuid": e.flowfile_uuid,
        "fileSizeBytes": e.file_size,
        "previousFileSizeBytes": e.previous_file_size,
        "componentId": e.component_id,
        "componentType": e.component_type,
        "transitUri": e.transit_uri,
        "sourceSystemFlowFileId": e.source_system_flowfile_identifier,
        "alternateIdentifierUri": e.alternate_identifier_uri,
        "details": e.details,
        "relationship": e.relationship,
        "sourceConnectionIdentifier": e.source_queue_identifier,
        "lineageStartDate": iso(e.lineage_start_date),
        "eventDuration": e.event_duration_ms,
        "parentUuids": list(e.parent_uuids),
        "childUuids": list(e.child_uuids),
        "attributes": attrs,
        "inputContentClaim": _claim(e, "previous_"),
        "outputContentClaim": _claim(e, ""),
    }
    if available is not None:
        out["inputContentAvailable"], out["outputContentAvailable"] = available
        out["replayAvailable"] = replay is None
        out["replayExplanation"] = replay
    return out


def lineage_dto(graph: Lineage) -> dict[str, Any]:
    """NiFi's `LineageResultsDTO`: nodes (EVENT / FLOWFILE) and links."""
    nodes = []
    for n in graph.nodes:
        node: dict[str, Any] = {
            "id": n.id,
            "type": n.kind,
            "flowFileUuid": n.flowfile_uuid,
            "millis": n.timestamp,
            "timestamp": iso(n.timestamp),
            "parentUuids": list(n.parent_uuids),
            "childUuids": list(n.child_uuids),
        }
        if n.kind == "EVENT":
            node["eventId"] = n.event_id
            node["eventType"] = n.event_type
        nodes.append(node)
    links = [
        {"sourceId": e.source, "targetId": e.target, "flowFileUuid": e.flowfile_uuid}
        for e in graph.edges
    ]
    return {"nodes": nodes, "links": links, "flowFileUuids": list(graph.flowfile_uuids)}


def jsonable(value: Any) -> Any:
    """DuckDB values as JSON: timestamps as ISO-8601 text, maps and lists kept."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.isoformat()
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return str(value)  # decimals, dates, blobs, uuids: text
