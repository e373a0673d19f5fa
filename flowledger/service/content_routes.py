"""Content put/get: bytes in, a claim out; a claim in, verified bytes out (streamed)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO, cast

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from storage.content import ContentClaim, ResourceClaim

from .errors import ServiceNotFound
from .names import checked
from .state import Services, services

router = APIRouter(tags=["content"])
CHUNK = 256 * 1024


@router.post(
    "/content",
    status_code=201,
    openapi_extra={
        "requestBody": {"content": {"application/octet-stream": {"schema": {"type": "string"}}}}
    },
)
async def put_content(request: Request, svc: Services = Depends(services)) -> dict[str, Any]:  # noqa: B008
    """Store the request body as one committed content; returns its claim."""
    with tempfile.SpooledTemporaryFile(max_size=8 * 2**20) as spool:
        async for chunk in request.stream():  # bounded by the request size limit
            spool.write(chunk)
        spool.seek(0)
        claim = await run_in_threadpool(_store, svc, cast(BinaryIO, spool))
    return {"claim": claim.to_dict()}


def _store(svc: Services, data: BinaryIO) -> ContentClaim:
    with svc.content.transaction() as session, session.write() as w:
        w.write_from(data)
    assert w.claim is not None
    return w.claim


def _claim(
    svc: Services,
    container: str,
    section: str,
    identifier: str,
    offset: int,
    length: int,
    checksum: str,
) -> ContentClaim:
    if container not in svc.content.get_container_names():
        raise ServiceNotFound(f"no content container {container!r} in this repository")
    rc = ResourceClaim(
        container, checked(section, "content section"), checked(identifier, "content claim")
    )
    return ContentClaim(rc, offset, length, checksum)


@router.get(
    "/content",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def get_content(
    container: str = Query(..., max_length=200),
    section: str = Query(..., max_length=200),
    identifier: str = Query(..., max_length=200),
    offset: int = Query(..., ge=0),
    length: int = Query(..., ge=0),
    checksum: str = Query(..., min_length=1, max_length=200),
    svc: Services = Depends(services),  # noqa: B008
) -> StreamingResponse:
    """The bytes of a claim (the fields `POST /content` returned), verified while streamed."""
    claim = _claim(svc, container, section, identifier, offset, length, checksum)
    if not svc.content.is_accessible(claim):
        raise ServiceNotFound(f"content {claim} is not in the content repository (gone?)")
    stream = svc.content.read(claim)

    def chunks() -> Iterator[bytes]:
        with stream:
            while chunk := stream.read(CHUNK):
                yield chunk

    return StreamingResponse(
        chunks(), media_type="application/octet-stream", headers={"Content-Length": str(length)}
    )
