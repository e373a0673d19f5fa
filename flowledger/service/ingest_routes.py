"""Provenance ingest over HTTP: JSON lines (the view's fields) or NiFi's site-to-site
provenance JSON — the same all-or-nothing staged ingest as `flowledger provenance ingest` — and
OpenLineage RunEvents as Marquez accepts them (`POST /api/v1/lineage`)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from provenance.ingest import ingest_file
from provenance.openlineage import ingest_json

from .errors import InvalidRequest
from .state import Services, services

router = APIRouter(tags=["ingest"])


def _ingest(svc: Services, body: bytes) -> dict[str, Any]:
    # The body is bounded by the request size limit; the file ingest validates every line,
    # refuses a re-ingested NiFi export and commits all events with one manifest.
    with tempfile.TemporaryDirectory(prefix="flowledger-http-ingest-") as tmp:
        path = Path(tmp) / "request-body"
        path.write_bytes(body)
        r = ingest_file(svc.prov, path)
    if not r.events:
        raise InvalidRequest("no events in the request body")
    return {"events": r.events, "firstEventId": r.first_event_id, "lastEventId": r.last_event_id}


@router.post(
    "/provenance/events",
    status_code=201,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
            },
        }
    },
)
async def ingest_events(
    request: Request,
    svc: Services = Depends(services),  # noqa: B008
) -> dict[str, Any]:
    """Register events: JSON lines with the view's field names, or NiFi's site-to-site
    provenance records (a JSON array or one per line). All or nothing; durable on return."""
    body = await request.body()
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest("the body is not UTF-8 text (JSON lines or a JSON array)") from exc
    return await run_in_threadpool(_ingest, svc, body)


@router.post("/api/v1/lineage", status_code=201)
async def openlineage(
    event: Annotated[dict[str, Any] | list[dict[str, Any]], Body()],
    response: Response,
    svc: Services = Depends(services),  # noqa: B008
) -> dict[str, Any]:
    """OpenLineage RunEvents in, as Marquez accepts them (the Spark listener's `http`
    transport): one event or a JSON array. COMPLETE runs with outputs become RECEIVE / JOIN /
    FORK / SEND events (docs/spark.md). Every event is checked first (a malformed one is a
    400 naming the field, and nothing is stored); `201` when events were stored, `200` with
    `stored: false` and the reason when nothing new was (a START, a run recorded before)."""
    r = await run_in_threadpool(ingest_json, svc.prov, event)
    if not r.stored:
        response.status_code = 200
    return {**dataclasses.asdict(r), "stored": r.stored, "detail": r.describe()}
