"""The app factory: lifespan, the request guard (token, body size), one-message errors."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from storage import FlowledgerBaseError, resolve_repo

from ..errors import INTERNAL, answer_for
from . import (
    content_routes,
    event_routes,
    ingest_routes,
    marquez_routes,
    provenance_routes,
    record_routes,
    sql_routes,
    table_sql_routes,
    timeline_routes,
)
from .auth import announce, bearer_auth, resolve_token
from .fast_events import EventFastPath, send_json
from .guard import RequestGuard
from .settings import ServiceSettings
from .state import Services

log = logging.getLogger("flowledger.service")
STATIC = resources.files("flowledger.service") / "static"


class ServiceApp(FastAPI):
    """The app, with the event lookup's fast path in front of all of it (fast_events.py)."""

    fast_path: EventFastPath | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = None if self.fast_path is None else self.fast_path.answer(scope)
        if body is None:
            await super().__call__(scope, receive, send)
        else:
            await send_json(send, body)


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc) or type(exc).__name__).split())[:1000]


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    async def known(_: Request, exc: Exception) -> Response:
        # The status is the error kind's (flowledger/errors.py), whichever layer raised it.
        answer = answer_for(exc)
        headers = getattr(exc, "headers", None)
        if answer is INTERNAL:  # a bug: its text may hold anything, it stays in the log
            log.error("request failed: %s: %s", type(exc).__name__, _one_line(exc))
            return JSONResponse({"detail": "internal error (see the server log)"}, 500)
        if answer.http_status >= 500:
            log.error("request failed: %s: %s", type(exc).__name__, _one_line(exc))
        return JSONResponse({"detail": _one_line(exc)}, answer.http_status, headers=headers)

    async def http(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        return JSONResponse(
            {"detail": str(exc.detail)}, exc.status_code, headers=getattr(exc, "headers", None)
        )

    async def invalid(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"detail": _validation_message(exc)}, 422)

    app.add_exception_handler(StarletteHTTPException, http)
    app.add_exception_handler(RequestValidationError, invalid)
    # Each family explicitly: a handler for bare Exception runs only after Starlette's error
    # middleware has logged a stack trace, which an expected 4xx must not produce.
    for family in (FlowledgerBaseError, ValueError, OSError, Exception):
        app.add_exception_handler(family, known)


def create_app(repo: str | None = None, settings: ServiceSettings | None = None) -> FastAPI:
    """The service app for repository `repo` (URI; default $FLOWLEDGER_REPO / embedded)."""
    uri = resolve_repo(repo)
    settings = settings or ServiceSettings()
    token = resolve_token(settings, uri)
    announce(token)
    holder: dict[str, Services] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        holder["s"] = Services(uri, settings)
        app.state.services = holder["s"]
        yield
        holder.pop("s").close()

    app = ServiceApp(
        title="flowledger",
        version="0.1.0",
        description="Provenance (NiFi-shaped), content and timelines of a flowledger repository",
        lifespan=lifespan,
        docs_url=None,  # Swagger UI would load its assets from a CDN
        redoc_url=None,
        openapi_url=None,  # served below, behind the token
    )
    app.add_middleware(RequestGuard, token=token.value, max_bytes=settings.max_request_size)
    app.fast_path = EventFastPath(token.value, lambda: holder.get("s"))
    install_error_handlers(app)
    auth = [Depends(bearer_auth(token.value))]

    @app.get("/health", tags=["service"])
    async def health() -> dict[str, str]:
        # async: answered on the event loop, never queued behind busy worker threads
        return {"status": "ok"}

    @app.get("/openapi.json", tags=["service"], dependencies=auth, include_in_schema=False)
    async def openapi() -> dict[str, Any]:
        return app.openapi()

    routers = (
        provenance_routes,
        event_routes,
        sql_routes,
        table_sql_routes,
        timeline_routes,
        content_routes,
        record_routes,
        marquez_routes,
    )
    for module in (*routers, ingest_routes):
        app.include_router(module.router, dependencies=auth)

    # The page is static (no data in it); everything it shows comes from the API, by token.
    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(str(STATIC / "favicon.svg"), media_type="image/svg+xml")

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return app
