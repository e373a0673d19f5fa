"""`POST /sql`: read-only SQL over the view `provenance` (see sandbox.py)."""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from .models import SqlBody
from .state import Services, services

router = APIRouter(tags=["sql"])

# The OpenAPI schema of an answer: FastAPI copies it into the document, never changes it.
ANSWER: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "columns": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "array"}},
        "truncated": {"type": "boolean"},
    },
    "required": ["columns", "rows", "truncated"],
}


@router.post(
    "/sql",
    response_class=Response,
    responses={200: {"content": {"application/json": {"schema": ANSWER}}}},
)
async def sql(body: SqlBody, svc: Services = Depends(services)) -> Response:  # noqa: B008
    """One SELECT over the view `provenance` (DuckDB): columns, rows, truncated."""
    # Checking, the query and its conversion run on the SQL threads, never on the pool the
    # other routes use (the parser is shared: checks of many long texts would queue there).
    answer = await svc.sql.slots.run(svc.sql.run, body.sql, body.maxRows)
    return Response(answer, media_type="application/json")
