"""Provenance ingest over HTTP: JSON lines (the view's fields) or NiFi's site-to-site
provenance JSON — the same readers as `flowledger provenance ingest`."""

from __future__ import annotations

import io
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from provenance.ingest import read_events

from .errors import ServiceError
from .state import Services, services

router = APIRouter(tags=["ingest"])
BATCH = 50_000


def _ingest(svc: Services, text: str) -> dict[str, Any]:
    events = list(read_events(io.StringIO(text)))  # all validated before anything is written
    if not events:
        raise ServiceError("no events in the request body")
    ids: list[int] = []
    for i in range(0, len(events), BATCH):
        ids += svc.prov.register_events(events[i : i + BATCH], sync=True)
    return {"events": len(ids), "firstEventId": ids[0], "lastEventId": ids[-1]}


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
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ServiceError("the body is not UTF-8 text (JSON lines or a JSON array)") from exc
    return await run_in_threadpool(_ingest, svc, text)
