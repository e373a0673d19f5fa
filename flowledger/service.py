"""`flowledger serve`: the HTTP service (FastAPI). Read-only SQL over provenance, events,
lineage and the timeline of a table — the same answers as the CLI's `--json` output."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Body, FastAPI, HTTPException, Query
from fastapi.responses import PlainTextResponse, Response

from provenance import EventNotFound, ProvenanceError, ProvenanceRepository, to_dot, to_svg
from storage import StorageError, open_store, resolve_repo
from timeline import Table, TimelineError


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)  # timestamps, decimals: ISO / text


def create_app(repo: str | None = None) -> FastAPI:
    uri = resolve_repo(repo)
    state: dict[str, ProvenanceRepository] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state["prov"] = ProvenanceRepository(open_store(uri), background=True)
        yield
        state.pop("prov").close()

    app = FastAPI(title="flowledger", version="0.1.0", lifespan=lifespan)

    def prov() -> ProvenanceRepository:
        return state["prov"]

    @app.exception_handler(StorageError)
    async def storage_error(_: Any, exc: StorageError) -> Response:
        return PlainTextResponse(str(exc), status_code=502)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "repo": uri}

    @app.get("/provenance/sql")
    def sql(
        q: str = Query(..., description="read-only SQL over the view `provenance`"),
    ) -> dict[str, Any]:
        try:
            columns, rows = prov().sql(q)
        except ProvenanceError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        return {"columns": columns, "rows": _jsonable(rows)}

    @app.get("/provenance/events")
    def events(first: int = 0, max: int = 100) -> list[dict[str, Any]]:
        return [_jsonable(e.to_dict()) for e in prov().get_events(first, min(max, 10_000))]

    @app.get("/provenance/events/{event_id}")
    def event(event_id: int) -> dict[str, Any]:
        try:
            return dict(_jsonable(prov().get_event(event_id).to_dict()))
        except EventNotFound as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc

    @app.get("/provenance/lineage/{flowfile_uuid}", response_model=None)
    def lineage(flowfile_uuid: str, format: str = "json") -> Any:
        try:
            graph = prov().lineage(flowfile_uuid)
        except ProvenanceError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        if format == "dot":
            return PlainTextResponse(to_dot(graph), media_type="text/vnd.graphviz")
        if format == "svg":
            return Response(to_svg(graph), media_type="image/svg+xml")
        return graph.to_json()

    @app.post("/api/v1/lineage", status_code=201)
    def openlineage(event: Annotated[Any, Body()]) -> dict[str, int]:
        """OpenLineage in, as Marquez accepts it (the listener's `http` transport)."""
        from provenance.openlineage import ingest_json

        try:
            return dict(ingest_json(prov(), event).__dict__)
        except ProvenanceError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    @app.get("/timeline")
    def timeline(table: str) -> list[dict[str, Any]]:
        try:
            t = Table.open(open_store(table))
            return [
                {"instant_time": i.time, "action": i.action, "state": i.state.value, "seq": i.seq}
                for i in t.timeline()
            ]
        except TimelineError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    return app


def serve(repo: str | None, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(create_app(repo), host=host, port=port, log_level="info")
