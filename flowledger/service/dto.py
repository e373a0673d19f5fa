"""Events and lineage graphs in the JSON shapes of NiFi's REST API (camelCase DTOs)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from provenance import Lineage, LineageNode, ProvenanceEvent

from . import nifi_format as fmt


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


def _flat_claim(e: ProvenanceEvent, prefix: str, nifi: str, size: int | None) -> dict[str, Any]:
    """NiFi's flat `inputContentClaim…` / `outputContentClaim…` fields."""
    return {
        f"{nifi}ContentClaimContainer": getattr(e, f"{prefix}content_claim_container"),
        f"{nifi}ContentClaimSection": getattr(e, f"{prefix}content_claim_section"),
        f"{nifi}ContentClaimIdentifier": getattr(e, f"{prefix}content_claim_identifier"),
        f"{nifi}ContentClaimOffset": getattr(e, f"{prefix}content_claim_offset"),
        f"{nifi}ContentClaimFileSize": fmt.data_size(size),
        f"{nifi}ContentClaimFileSizeBytes": size,
    }


def content_equal(e: ProvenanceEvent) -> bool:
    """NiFi's `ContentAvailability.isContentSame`: input and output name the same bytes."""
    return all(
        getattr(e, f"previous_content_claim_{part}") == getattr(e, f"content_claim_{part}")
        for part in ("container", "section", "identifier", "offset")
    )


def event_dto(
    e: ProvenanceEvent,
    available: tuple[bool, bool] | None = None,
    replay: str | None = None,
    summarize: bool = False,
) -> dict[str, Any]:
    """NiFi's `ProvenanceEventDTO` (as NiFi's `createProvenanceEventDto` fills it).

    `summarize`: only the fields NiFi keeps in a summary (its UI's result table).
    `available`: (input, output) content still readable, with `replay` why replay is not
    possible (None: possible); without it (event listings) those four fields are left out.
    `componentName` and `groupId` come from a NiFi export's record when it had them; the
    component id names a component otherwise (NiFi's fallback). flowledger's additions:
    `previousFileSizeBytes`, `lineageStartDate` (ISO-8601) and the claims as objects with
    their checksums (`inputContentClaim`, `outputContentClaim`)."""
    extra = e.source_fields
    out: dict[str, Any] = {
        "id": str(e.event_id),
        "eventId": e.event_id,
        "eventTime": fmt.timestamp(e.event_time),
        "eventTimestamp": fmt.iso(e.event_time),
        "eventType": e.event_type,
        "flowFileUuid": e.flowfile_uuid,
        "fileSize": fmt.data_size(e.file_size),
        "fileSizeBytes": e.file_size,
        "componentId": e.component_id,
        "componentType": e.component_type,
        "componentName": extra.get("componentName") or e.component_id,
        "groupId": extra.get("processGroupId") or None,
        # In NiFi's summary too: its result table has Filename and Transit URI columns.
        "filename": e.attributes.get("filename"),
        "transitUri": e.transit_uri,
    }
    if summarize:
        return out
    before = dict(e.previous_attributes)
    after = e.attributes
    start = e.lineage_start_date
    out.update(
        {
            "sourceSystemFlowFileId": e.source_system_flowfile_identifier,
            "alternateIdentifierUri": e.alternate_identifier_uri,
            "details": e.details,
            "relationship": e.relationship,
            "sourceConnectionIdentifier": e.source_queue_identifier,
            "eventDuration": e.event_duration_ms if e.event_duration_ms >= 0 else None,
            "lineageDuration": e.event_time - start if start and start > 0 else None,
            "parentUuids": sorted(e.parent_uuids),
            "childUuids": sorted(e.child_uuids),
            "attributes": [
                {"name": k, "value": after.get(k), "previousValue": before.get(k)}
                for k in sorted(set(before) | set(after))
            ],
            "contentEqual": content_equal(e),
            **_flat_claim(e, "previous_", "input", e.previous_file_size),
            **_flat_claim(e, "", "output", e.file_size),
            "previousFileSizeBytes": e.previous_file_size,
            "lineageStartDate": fmt.iso(start),
            "inputContentClaim": _claim(e, "previous_"),
            "outputContentClaim": _claim(e, ""),
        }
    )
    if available is not None:
        out["inputContentAvailable"], out["outputContentAvailable"] = available
        out["replayAvailable"] = replay is None
        out["replayExplanation"] = replay
    return out


def node_id(node: LineageNode) -> str:
    """NiFi's node ids: an event's id, or a FlowFile's UUID (`event:26` -> `26`)."""
    return str(node.event_id) if node.kind == "EVENT" else node.flowfile_uuid


def lineage_dto(graph: Lineage) -> dict[str, Any]:
    """NiFi's `LineageResultsDTO`: nodes (EVENT / FLOWFILE) and links; a link's time is its
    target node's (NiFi's). flowledger adds `eventId` to event nodes and `flowFileUuids`."""
    ids = {n.id: node_id(n) for n in graph.nodes}
    millis = {n.id: n.timestamp for n in graph.nodes}
    nodes = []
    for n in graph.nodes:
        node: dict[str, Any] = {
            "id": ids[n.id],
            "type": n.kind,
            "flowFileUuid": n.flowfile_uuid,
            "millis": n.timestamp,
            "timestamp": fmt.timestamp(n.timestamp),
            "parentUuids": list(n.parent_uuids),
            "childUuids": list(n.child_uuids),
        }
        if n.kind == "EVENT":
            node["eventId"] = n.event_id
            node["eventType"] = n.event_type
            node["componentType"] = n.component_type
        nodes.append(node)
    links = [
        {
            "sourceId": ids.get(e.source, e.source),
            "targetId": ids.get(e.target, e.target),
            "flowFileUuid": e.flowfile_uuid,
            "millis": millis.get(e.target),
            "timestamp": fmt.timestamp(millis.get(e.target)),
        }
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
