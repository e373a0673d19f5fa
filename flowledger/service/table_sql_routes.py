"""`POST /tables/{name}/sql`: read-only SQL over one table of the repository, by name, with
the view `provenance` beside it: the sandbox, slots and answer bounds of `POST /sql`."""

from __future__ import annotations

import duckdb
from fastapi import APIRouter, Depends
from fastapi.responses import Response

from ..table_sql import ALIAS, TableRead, connect
from .errors import InvalidRequest
from .models import TableSqlBody
from .sandbox import VIEW
from .sql_routes import ANSWER
from .state import Services, services
from .timeline_routes import named_table

router = APIRouter(tags=["sql"])


def _run(svc: Services, name: str, body: TableSqlBody) -> bytes:
    try:
        read = TableRead(body.asOf, body.changesSince, body.cdc, body.fullScan)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from exc
    svc.sql.check(body.sql, (name, ALIAS, VIEW))  # before any request for the table
    table = named_table(svc, name)
    temp_dir, memory = svc.sql.temp_dir, svc.settings.sql_memory_limit

    def connect_table() -> duckdb.DuckDBPyConnection:
        return connect(svc.prov, table, read, name, temp_dir, memory)

    return svc.sql.execute(body.sql, body.maxRows, connect_table)


@router.post(
    "/tables/{name}/sql",
    response_class=Response,
    responses={200: {"content": {"application/json": {"schema": ANSWER}}}},
)
async def table_sql(
    name: str,
    body: TableSqlBody,
    svc: Services = Depends(services),  # noqa: B008
) -> Response:
    """One SELECT over the table `name` (views `name` and `t`) and `provenance` (DuckDB):
    columns, rows, truncated."""
    answer = await svc.sql.slots.run(_run, svc, name, body)
    return Response(answer, media_type="application/json")
