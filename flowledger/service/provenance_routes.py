"""NiFi's provenance REST resources under `/nifi-api`: queries, lineage, events, content
download and replay; plus flowledger's own event listing and lineage rendering."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from provenance import SEARCHABLE_FIELDS, ProvenanceEvent, SearchTerm, to_dot, to_svg
from provenance import Query as ProvQuery
from provenance.replay import replay, replay_failure
from storage.content import ContentClaim, ResourceClaim

from .dto import event_dto, iso, lineage_dto
from .errors import NotFoundError
from .models import LineageBody, LineageRequest, ProvenanceBody, ProvenanceRequest, ReplayBody
from .names import checked
from .queries import Submission
from .state import Services, services

router = APIRouter(tags=["provenance"])
Svc = Depends(services)
CHUNK = 256 * 1024

#: NiFi's searchable field ids -> ours.
NIFI_TERMS = {
    "EventType": "event_type",
    "FlowFileUUID": "flowfile_uuid",
    "Filename": "filename",
    "ProcessorID": "component_id",
    "ComponentID": "component_id",
    "ComponentType": "component_type",
    "Relationship": "relationship",
    "TransitURI": "transit_uri",
    "Details": "details",
    "AlternateIdentifierURI": "alternate_identifier_uri",
    "SourceQueueIdentifier": "source_queue_identifier",
}


def _field(key: str) -> str:
    if key in NIFI_TERMS:
        return NIFI_TERMS[key]
    if key in SEARCHABLE_FIELDS or key.startswith("attr."):
        return key
    return f"attr.{key}"  # NiFi keys indexed attributes by their name


def _ms(value: Any) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


# -- provenance queries ---------------------------------------------------------------------
def _run_query(svc: Services, sub: Submission) -> list[ProvenanceEvent]:
    req = ProvenanceRequest.model_validate(sub.request)
    terms = tuple(SearchTerm(_field(k), v.value, v.inverse) for k, v in req.searchTerms.items())
    # Events newer than the submission are left out, so every replica answers the same.
    newer = max(0, svc.prov.max_event_id() - sub.max_event_id)
    q = ProvQuery(
        terms,
        start_time=_ms(req.startDate),
        end_time=_ms(req.endDate),
        min_file_size=req.minimumFileSize,
        max_file_size=req.maximumFileSize,
        max_results=req.maxResults + min(newer, 10_000),
    )
    found = [e for e in svc.prov.query(q) if e.event_id <= sub.max_event_id]
    return found[: req.maxResults]


def _query_entity(svc: Services, sub: Submission) -> dict[str, Any]:
    cached = svc.submissions.cached(sub.id)
    if cached is not None:
        return cached
    events = _run_query(svc, sub)
    entity = {
        "provenance": {
            "id": sub.id,
            "uri": f"/nifi-api/provenance/{sub.id}",
            "submissionTime": iso(sub.submitted_ms),
            "expiration": iso(svc.submissions.expires_ms(sub)),
            "percentCompleted": 100,
            "finished": True,
            "request": sub.request,
            "results": {
                "provenanceEvents": [event_dto(e) for e in events],
                "total": str(len(events)),
                "totalCount": len(events),
                "generated": iso(sub.submitted_ms),
                "oldestEvent": iso(min((e.event_time for e in events), default=None)),
                "errors": [],
            },
        }
    }
    svc.submissions.remember(sub.id, entity)
    return entity


@router.post("/nifi-api/provenance", status_code=201)
def submit_query(body: ProvenanceBody, svc: Services = Svc) -> dict[str, Any]:
    """Submit a provenance query (NiFi's `POST /provenance`); the answer is complete at once
    and stays available under its id until it expires."""
    request = body.provenance.request.model_dump(mode="json", exclude_none=True)
    for key in body.provenance.request.searchTerms:
        SearchTerm(_field(key), "x")  # an unsearchable field is a 400 now, not at poll time
    sub = svc.submissions.new("query", request, svc.prov.max_event_id())
    return _query_entity(svc, sub)


@router.get("/nifi-api/provenance/search-options")
def search_options() -> dict[str, Any]:
    """The searchable fields (NiFi ids and ours); any other key searches that attribute."""
    return {
        "provenanceOptions": {
            "searchableFields": [
                {"id": nifi, "field": ours, "label": ours, "type": "STRING"}
                for nifi, ours in NIFI_TERMS.items()
            ]
        }
    }


@router.get("/nifi-api/provenance/{query_id}")
def get_query(query_id: str, svc: Services = Svc) -> dict[str, Any]:
    """Poll a provenance query (404 once expired or deleted)."""
    return _query_entity(svc, svc.submissions.check(query_id, "query"))


@router.delete("/nifi-api/provenance/{query_id}")
def delete_query(query_id: str, svc: Services = Svc) -> dict[str, Any]:
    sub = svc.submissions.delete(query_id, "query")
    return {"provenance": {"id": sub.id, "finished": True}}


# -- lineage -------------------------------------------------------------------------------
def _lineage_entity(svc: Services, sub: Submission) -> dict[str, Any]:
    cached = svc.submissions.cached(sub.id)
    if cached is not None:
        return cached
    req = LineageRequest.model_validate(sub.request)
    if req.lineageRequestType == "PARENTS":
        assert req.eventId is not None
        graph = svc.prov.expand_parents(req.eventId)
    elif req.lineageRequestType == "CHILDREN":
        assert req.eventId is not None
        graph = svc.prov.expand_children(req.eventId)
    else:
        uuid = req.uuid or svc.prov.get_event(req.eventId or 0).flowfile_uuid
        graph = svc.prov.lineage(uuid)
    entity = {
        "lineage": {
            "id": sub.id,
            "uri": f"/nifi-api/provenance/lineage/{sub.id}",
            "submissionTime": iso(sub.submitted_ms),
            "expiration": iso(svc.submissions.expires_ms(sub)),
            "percentCompleted": 100,
            "finished": True,
            "request": sub.request,
            "results": {**lineage_dto(graph), "errors": []},
        }
    }
    svc.submissions.remember(sub.id, entity)
    return entity


@router.post("/nifi-api/provenance/lineage", status_code=201)
def submit_lineage(body: LineageBody, svc: Services = Svc) -> dict[str, Any]:
    """Submit a lineage request: a FlowFile's lineage, or expand an event's parents/children."""
    request = body.lineage.request.model_dump(mode="json", exclude_none=True)
    sub = svc.submissions.new("lineage", request, svc.prov.max_event_id())
    return _lineage_entity(svc, sub)


@router.get("/nifi-api/provenance/lineage/{lineage_id}")
def get_lineage(lineage_id: str, svc: Services = Svc) -> dict[str, Any]:
    return _lineage_entity(svc, svc.submissions.check(lineage_id, "lineage"))


@router.delete("/nifi-api/provenance/lineage/{lineage_id}")
def delete_lineage(lineage_id: str, svc: Services = Svc) -> dict[str, Any]:
    sub = svc.submissions.delete(lineage_id, "lineage")
    return {"lineage": {"id": sub.id, "finished": True}}


# -- events, content, replay ---------------------------------------------------------------
def _claim(svc: Services, e: ProvenanceEvent, direction: str) -> ContentClaim | None:
    if direction == "input":
        prefix, size = "previous_", e.previous_file_size
    else:
        prefix, size = "", e.file_size
    container = getattr(e, f"{prefix}content_claim_container")
    section = getattr(e, f"{prefix}content_claim_section")
    ident = getattr(e, f"{prefix}content_claim_identifier")
    offset = getattr(e, f"{prefix}content_claim_offset")
    if not (container and section and ident) or offset is None or size is None:
        return None
    if container not in svc.content.get_container_names():
        return None  # e.g. imported from NiFi: its content is not in this repository
    rc = ResourceClaim(
        container, checked(section, "content section"), checked(ident, "content claim")
    )
    checksum = getattr(e, f"{prefix}content_claim_checksum") or ""
    return ContentClaim(rc, int(offset), int(size), checksum)


def _available(svc: Services, claim: ContentClaim | None) -> bool:
    return claim is not None and claim.written and svc.content.is_accessible(claim)


@router.get("/nifi-api/provenance-events/{event_id}")
async def get_event(event_id: int, svc: Services = Svc) -> dict[str, Any]:
    """One event (NiFi's `ProvenanceEventEntity`), with content and replay availability.

    Answered on the event loop when memory alone answers it (the event decoded, no content
    claim to check): the thread-pool hop of a sync route costs more CPU (~0.3 ms) than such
    a lookup (~0.15 ms). Anything that reads goes to the thread pool. (The same answer is
    usually given before the router, by `fast_events.EventFastPath`.)"""
    entity = memory_entity(svc, event_id)
    if entity is not None:
        return entity
    return await run_in_threadpool(_read_event, svc, event_id)


def memory_entity(svc: Services, event_id: int) -> dict[str, Any] | None:
    """The event's entity if memory alone answers (decoded, no content claim); else None."""
    e = svc.prov.cached_event(event_id)
    if e is None or _claim(svc, e, "input") is not None or _claim(svc, e, "output") is not None:
        return None
    # `_event_entity` without its claim checks: neither content can be available.
    return {"provenanceEvent": event_dto(e, (False, False), replay_failure(e, svc.content))}


def _read_event(svc: Services, event_id: int) -> dict[str, Any]:
    return _event_entity(svc, svc.prov.get_event(event_id))


def _event_entity(svc: Services, e: ProvenanceEvent) -> dict[str, Any]:
    available = (
        _available(svc, _claim(svc, e, "input")),
        _available(svc, _claim(svc, e, "output")),
    )
    return {"provenanceEvent": event_dto(e, available, replay_failure(e, svc.content))}


_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9_.\-]+")


@router.get(
    "/nifi-api/provenance-events/{event_id}/content/{direction}",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def download_content(
    event_id: int, direction: Literal["input", "output"], svc: Services = Svc
) -> StreamingResponse:
    """The content an event saw (input) or produced (output), streamed from the content
    repository and verified against its checksum; 404 when the content is gone."""
    e = svc.prov.get_event(event_id)
    claim = _claim(svc, e, direction)
    if claim is None:
        raise NotFoundError(f"event {event_id} has no {direction} content in this repository")
    if not _available(svc, claim):
        raise NotFoundError(
            f"the {direction} content of event {event_id} is no longer in the content "
            "repository (removed or expired)"
        )
    stream = svc.content.read(claim)

    def chunks() -> Iterator[bytes]:
        with stream:
            while chunk := stream.read(CHUNK):
                yield chunk

    attrs = e.previous_attributes if direction == "input" else e.attributes
    name = _UNSAFE_FILENAME.sub("_", attrs.get("filename") or f"event-{event_id}-{direction}")
    return StreamingResponse(
        chunks(),
        media_type=attrs.get("mime.type") or "application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "Content-Length": str(claim.length),
        },
    )


@router.post("/nifi-api/provenance-events/replays", status_code=201)
def replay_event(body: ReplayBody, svc: Services = Svc) -> dict[str, Any]:
    """Replay an event: its content as a new FlowFile and a REPLAY event (409 if it cannot)."""
    return replay(svc.prov, body.eventId, svc.content, requested_by="flowledger serve").to_json()


@router.get("/provenance/events")
def list_events(
    first: int = Query(0, ge=0),
    max: int = Query(100, ge=1, le=10_000),
    svc: Services = Svc,
) -> list[dict[str, Any]]:
    """Events with id >= first in id order (NiFi's getEvents), in NiFi's DTO shape."""
    return [event_dto(e) for e in svc.prov.get_events(first, max)]


@router.get("/provenance/lineage/{flowfile_uuid}", response_model=None)
def render_lineage(
    flowfile_uuid: str,
    format: Literal["json", "dot", "svg"] = "json",
    svc: Services = Svc,
) -> Any:
    """A FlowFile's lineage as JSON (NiFi's shape), Graphviz DOT or SVG."""
    graph = svc.prov.lineage(flowfile_uuid)
    if format == "dot":
        return PlainTextResponse(to_dot(graph), media_type="text/vnd.graphviz")
    if format == "svg":
        return Response(to_svg(graph), media_type="image/svg+xml")
    return lineage_dto(graph)
