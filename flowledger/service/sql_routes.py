"""`POST /sql`: read-only SQL over the view `provenance` (see sandbox.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from .dto import jsonable
from .models import SqlBody
from .state import Services, services

router = APIRouter(tags=["sql"])


@router.post("/sql")
def sql(body: SqlBody, svc: Services = Depends(services)) -> dict[str, Any]:  # noqa: B008
    """One SELECT over the view `provenance` (DuckDB): columns, rows, truncated."""
    answer = svc.sql.run(body.sql, body.maxRows)
    return {
        "columns": answer.columns,
        "rows": jsonable(answer.rows),
        "truncated": answer.truncated,
    }
