"""NiFi's provenance REST resources under `/nifi-api` (its ProvenanceApi): queries and
lineage; plus flowledger's own event listing and lineage rendering. Events, content and replay
are in event_routes.py."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse, Response

import flowledger
from provenance import SEARCHABLE_FIELDS, ProvenanceEvent, SearchTerm, to_dot, to_svg
from provenance import Query as ProvQuery

from . import nifi_format as fmt
from .dto import event_dto, lineage_dto
from .event_routes import Availability, full_dto
from .models import LineageBody, LineageRequest, ProvenanceBody, ProvenanceRequest
from .queries import Submission
from .state import Services, services

router = APIRouter(tags=["provenance"])
Svc = Depends(services)

#: NiFi's searchable field ids -> ours.
NIFI_TERMS = MappingProxyType(
    {
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
)


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


def _nifi_request(req: ProvenanceRequest) -> dict[str, Any]:
    """The request as NiFi echoes it: dates in its format, sizes as `DataUnit` text."""
    out: dict[str, Any] = {
        "searchTerms": {k: v.model_dump() for k, v in req.searchTerms.items()},
        "maxResults": req.maxResults,
        "summarize": req.summarize,
        "incrementalResults": req.incrementalResults,
    }
    for key, when in (("startDate", req.startDate), ("endDate", req.endDate)):
        if when is not None:
            out[key] = fmt.date_time(when)
    for key, size in (
        ("minimumFileSize", req.minimumFileSize),
        ("maximumFileSize", req.maximumFileSize),
    ):
        if size is not None:
            out[key] = f"{size} B"
    return out


def _query_entity(svc: Services, sub: Submission, summarize: bool | None) -> dict[str, Any]:
    """NiFi's `ProvenanceEntity`. `summarize` (a poll's parameter) overrides the request's."""
    req = ProvenanceRequest.model_validate(sub.request)
    brief = req.summarize if summarize is None else summarize
    key = f"{sub.id}:{int(brief)}"
    cached = svc.submissions.cached(key)
    if cached is not None:
        return cached
    events = _run_query(svc, sub)
    # NiFi: as many hits as asked for means there may be more ("1,000+").
    capped = len(events) >= req.maxResults
    oldest = svc.prov.get_events(0, 1)
    dtos = (
        [event_dto(e, summarize=True) for e in events]
        if brief
        else [full_dto(svc, e, check) for check in [Availability(svc)] for e in events]
    )
    entity = {
        "provenance": {
            "id": sub.id,
            "uri": f"/nifi-api/provenance/{sub.id}",
            "submissionTime": fmt.timestamp(sub.submitted_ms),
            "expiration": fmt.timestamp(svc.submissions.expires_ms(sub)),
            "percentCompleted": 100,
            "finished": True,
            "request": _nifi_request(req),
            "results": {
                "provenanceEvents": dtos,
                "total": fmt.count(len(events)) + ("+" if capped else ""),
                "totalCount": len(events),
                "generated": fmt.time_of_day(sub.submitted_ms),
                "oldestEvent": fmt.timestamp(oldest[0].event_time if oldest else None),
                "timeOffset": 0,  # the server's zone is UTC
                "errors": [],
            },
        }
    }
    svc.submissions.remember(key, entity)
    return entity


@router.post("/nifi-api/provenance", status_code=201)
def submit_query(body: ProvenanceBody, response: Response, svc: Services = Svc) -> dict[str, Any]:
    """Submit a provenance query (NiFi's `POST /provenance`); the answer is complete at once
    and stays available under its id (the `Location`) until it expires."""
    request = body.provenance.request.model_dump(mode="json", exclude_none=True)
    for key in body.provenance.request.searchTerms:
        SearchTerm(_field(key), "x")  # an unsearchable field is a 400 now, not at poll time
    sub = svc.submissions.new("query", request, svc.prov.max_event_id())
    entity = _query_entity(svc, sub, None)
    response.headers["Location"] = entity["provenance"]["uri"]
    return entity


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
def get_query(
    query_id: str,
    summarize: bool | None = None,
    incrementalResults: bool | None = None,
    clusterNodeId: str | None = Query(None, max_length=256),
    svc: Services = Svc,
) -> dict[str, Any]:
    """Poll a provenance query (404 once expired or deleted). Every answer is complete, so
    `incrementalResults` changes nothing; `clusterNodeId` is ignored (one node)."""
    return _query_entity(svc, svc.submissions.check(query_id, "query"), summarize)


@router.delete("/nifi-api/provenance/{query_id}")
def delete_query(
    query_id: str,
    clusterNodeId: str | None = Query(None, max_length=256),
    svc: Services = Svc,
) -> dict[str, Any]:
    sub = svc.submissions.delete(query_id, "query")  # its cached answers are never served
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
            "submissionTime": fmt.timestamp(sub.submitted_ms),
            "expiration": fmt.timestamp(svc.submissions.expires_ms(sub)),
            "percentCompleted": 100,
            "finished": True,
            "request": sub.request,
            "results": {**lineage_dto(graph), "errors": []},
        }
    }
    svc.submissions.remember(sub.id, entity)
    return entity


@router.post("/nifi-api/provenance/lineage", status_code=201)
def submit_lineage(body: LineageBody, response: Response, svc: Services = Svc) -> dict[str, Any]:
    """Submit a lineage request: a FlowFile's lineage, or expand an event's parents/children."""
    request = body.lineage.request.model_dump(mode="json", exclude_none=True)
    sub = svc.submissions.new("lineage", request, svc.prov.max_event_id())
    entity = _lineage_entity(svc, sub)
    response.headers["Location"] = entity["lineage"]["uri"]
    return entity


@router.get("/nifi-api/provenance/lineage/{lineage_id}")
def get_lineage(
    lineage_id: str,
    clusterNodeId: str | None = Query(None, max_length=256),
    svc: Services = Svc,
) -> dict[str, Any]:
    return _lineage_entity(svc, svc.submissions.check(lineage_id, "lineage"))


@router.delete("/nifi-api/provenance/lineage/{lineage_id}")
def delete_lineage(
    lineage_id: str,
    clusterNodeId: str | None = Query(None, max_length=256),
    svc: Services = Svc,
) -> dict[str, Any]:
    sub = svc.submissions.delete(lineage_id, "lineage")
    return {"lineage": {"id": sub.id, "finished": True}}


@router.get("/nifi-api/flow/about")
def about() -> dict[str, Any]:
    """NiFi's `AboutEntity`, which NiFi's clients read first (version, time zone)."""
    return {
        "about": {
            "title": "flowledger",
            "version": flowledger.__version__,
            "uri": "/nifi-api/",
            "contentViewerUrl": None,
            "timezone": "UTC",
            "buildTag": None,
            "buildRevision": None,
            "buildBranch": None,
            "buildTimestamp": None,
        }
    }


# -- flowledger's own ------------------------------------------------------------------
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
