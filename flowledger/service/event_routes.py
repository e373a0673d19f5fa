"""NiFi's provenance event resources under `/nifi-api` (its ProvenanceEventsApi): an event by
id, its input/output content (with `Range`), replay, and NiFi 2's latest events of a component
and replay of the latest one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response, StreamingResponse

from provenance import ProvenanceEvent, SearchTerm
from provenance import Query as ProvQuery
from provenance.replay import replay, replay_failure
from storage.content import ContentClaim, ResourceClaim

from .dto import event_dto
from .errors import ServiceNotFound
from .models import ReplayBody, ReplayLastEventBody
from .names import checked
from .state import Services, services

router = APIRouter(tags=["provenance"])
Svc = Depends(services)
CHUNK = 256 * 1024
#: How many latest events of a component `GET /provenance-events/latest/{id}` returns by
#: default (NiFi keeps the last 8 of each component in memory).
LATEST_EVENTS = 8


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


class Availability:
    """Content checks for many events (a query's results): each claim is checked once (one
    HEAD at most), for its availability and for replay."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc
        self._seen: dict[ContentClaim, bool] = {}

    def is_accessible(self, claim: ContentClaim) -> bool:
        if claim not in self._seen:
            self._seen[claim] = self.svc.content.is_accessible(claim)
        return self._seen[claim]

    def __call__(self, claim: ContentClaim | None) -> bool:
        return claim is not None and claim.written and self.is_accessible(claim)


def full_dto(
    svc: Services, e: ProvenanceEvent, check: Availability | None = None
) -> dict[str, Any]:
    """NiFi's complete `ProvenanceEventDTO`: with content and replay availability."""
    check = check or Availability(svc)
    available = (check(_claim(svc, e, "input")), check(_claim(svc, e, "output")))
    return event_dto(e, available, replay_failure(e, check))


@router.get("/nifi-api/provenance-events/{event_id}")
async def get_event(
    event_id: int,
    clusterNodeId: str | None = Query(None, max_length=256),
    svc: Services = Svc,
) -> dict[str, Any]:
    """One event (NiFi's `ProvenanceEventEntity`), with content and replay availability.
    A lineage node's `id` is the event's id, as in NiFi.

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
    # `full_dto` without its claim checks: neither content can be available.
    return {"provenanceEvent": event_dto(e, (False, False), replay_failure(e, svc.content))}


def _read_event(svc: Services, event_id: int) -> dict[str, Any]:
    return {"provenanceEvent": full_dto(svc, svc.prov.get_event(event_id))}


_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9_.\-]+")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _not_satisfiable(message: str, length: int) -> HTTPException:
    return HTTPException(416, message, headers={"Content-Range": f"bytes */{length}"})


def byte_range(header: str | None, length: int) -> tuple[int, int] | None:
    """The (first, last) byte of a single-range `Range` header, None for the whole content.
    Several ranges or another unit are answered with the whole content (allowed by RFC 9110);
    a range past the end is HTTP's own answer, 416 with `Content-Range: bytes */<length>`."""
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if m.group(1):
        first = int(m.group(1))
        last = min(int(m.group(2)), length - 1) if m.group(2) else length - 1
        if m.group(2) and int(m.group(2)) < first:
            return None  # an invalid range is ignored (RFC 9110 14.2)
    else:
        suffix = int(m.group(2))
        if suffix == 0:
            raise _not_satisfiable(f"range {header[:60]!r} asks for no bytes", length)
        first, last = max(0, length - suffix), length - 1
    if first >= length:
        raise _not_satisfiable(
            f"range {header[:60]!r} starts past the end of the content ({length} bytes)", length
        )
    return first, last


@router.get(
    "/nifi-api/provenance-events/{event_id}/content/{direction}",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/octet-stream": {}}},
        206: {"content": {"application/octet-stream": {}}},
    },
)
def download_content(
    event_id: int,
    direction: Literal["input", "output"],
    range: str | None = Header(None, max_length=200),
    clusterNodeId: str | None = Query(None, max_length=256),
    svc: Services = Svc,
) -> StreamingResponse:
    """The content an event saw (input) or produced (output), streamed from the content
    repository and verified against its checksum; 404 when the content is gone.

    `Range: bytes=a-b` answers 206 with `Content-Range`. The checksum covers the whole
    content, so a range is verified too: the content is read to its end and the range's last
    bytes are sent only once it matched (a mismatch cuts the response short)."""
    e = svc.prov.get_event(event_id)
    claim = _claim(svc, e, direction)
    if claim is None:
        raise ServiceNotFound(f"event {event_id} has no {direction} content in this repository")
    if not _available(svc, claim):
        raise ServiceNotFound(
            f"the {direction} content of event {event_id} is no longer in the content "
            "repository (removed or expired)"
        )
    wanted = byte_range(range, claim.length)
    stream = svc.content.read(claim)
    first, last = wanted if wanted is not None else (0, claim.length - 1)

    def chunks() -> Iterator[bytes]:
        with stream:
            pos, held = 0, b""
            while chunk := stream.read(CHUNK):
                lo, hi = max(first - pos, 0), min(last + 1 - pos, len(chunk))
                pos += len(chunk)
                if lo < hi:
                    if held:
                        yield held
                    held = chunk[lo:hi]
            # The stream verified the checksum at its end: now the last bytes may go.
            if held:
                yield held

    attrs = e.previous_attributes if direction == "input" else e.attributes
    name = _UNSAFE_FILENAME.sub("_", attrs.get("filename") or f"event-{event_id}-{direction}")
    headers = {
        "Content-Disposition": f'attachment; filename="{name}"',
        "Content-Length": str(last - first + 1),
        "Accept-Ranges": "bytes",
    }
    if wanted is not None:
        headers["Content-Range"] = f"bytes {first}-{last}/{claim.length}"
    return StreamingResponse(
        chunks(),
        status_code=206 if wanted is not None else 200,
        media_type=attrs.get("mime.type") or "application/octet-stream",
        headers=headers,
    )


@router.post("/nifi-api/provenance-events/replays", status_code=201)
def replay_event(body: ReplayBody, response: Response, svc: Services = Svc) -> dict[str, Any]:
    """Replay an event: its content as a new FlowFile and a REPLAY event (409 if it cannot).
    Answers the REPLAY event (NiFi's `ProvenanceEventEntity`), its URI in `Location`."""
    result = replay(svc.prov, body.eventId, svc.content, requested_by="flowledger serve")
    response.headers["Location"] = f"/nifi-api/provenance-events/{result.replay_event_id}"
    return {"provenanceEvent": full_dto(svc, svc.prov.get_event(result.replay_event_id))}


def _latest(svc: Services, component_id: str, limit: int) -> list[ProvenanceEvent]:
    # Queries answer newest first; `*` and `?` in an id are wildcards to a query: keep exact.
    term = SearchTerm("component_id", component_id)
    found = svc.prov.query(ProvQuery((term,), max_results=limit))
    return [e for e in found if e.component_id == component_id]


@router.get("/nifi-api/provenance-events/latest/{component_id}")
def latest_events(
    component_id: str,
    limit: int = Query(LATEST_EVENTS, ge=1, le=1000),
    svc: Services = Svc,
) -> dict[str, Any]:
    """NiFi 2's latest events of a component (`LatestProvenanceEventsEntity`), newest first.
    NiFi answers from an in-memory cache of recent events; this asks the repository."""
    check = Availability(svc)
    events = [full_dto(svc, e, check) for e in _latest(svc, component_id, limit)]
    return {"latestProvenanceEvents": {"componentId": component_id, "provenanceEvents": events}}


@router.post("/nifi-api/provenance-events/latest/replays")
def replay_latest(body: ReplayLastEventBody, svc: Services = Svc) -> dict[str, Any]:
    """NiFi 2's "replay last event" of a component (`ReplayLastEventResponseEntity`); `nodes`
    is accepted and means this one node."""
    latest = _latest(svc, body.componentId, 1)
    snapshot: dict[str, Any] = {"eventAvailable": bool(latest), "eventsReplayed": []}
    if not latest:
        snapshot["failureExplanation"] = f"no provenance event for component {body.componentId}"
    else:
        why = replay_failure(latest[0], svc.content)
        if why is not None:
            snapshot["failureExplanation"] = why
        else:
            done = replay(svc.prov, latest[0].event_id, svc.content, "flowledger serve")
            snapshot["eventsReplayed"] = [done.replay_event_id]
    return {
        "componentId": body.componentId,
        "nodes": body.nodes,
        "aggregateSnapshot": snapshot,
        "nodeSnapshots": [],
    }
