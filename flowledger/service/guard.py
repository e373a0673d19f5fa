"""The outer ASGI guard: the token and the body size are checked before any body is read.

A route's dependencies run only after FastAPI has read and parsed the body, so a token check
there lets anyone without a token make the server buffer `max_request_size` bytes per request
(30 concurrent 60 MB posts: 2 GB). Here the `Authorization` header is checked when the headers
have arrived, and a refused request's body is never received; a body is counted while it
streams in and refused at the limit.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import bearer_problem

#: Paths served without a token: the health check and the static page shell (no data in it),
#: its icon included (browsers ask for `/favicon.ico` without the page's token).
PUBLIC_PATHS = frozenset({"/health", "/", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)
#: A refused request declaring a larger body gets `Connection: close`: the server would
#: otherwise have to read and discard the body to keep the connection.
_KEEP_ALIVE_BODY = 64 * 1024


def _public(scope: Scope) -> bool:
    path: str = scope["path"]
    return scope["method"] in ("GET", "HEAD") and (
        path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
    )


class RequestGuard:
    """401 before the body for a request without the token (but public paths); 413 for a
    body over `max_bytes`: by Content-Length up front, else counted while it streams."""

    def __init__(self, app: ASGIApp, token: str, max_bytes: int) -> None:
        self.app = app
        self.expected = token.encode()
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authorization = None
        declared: int | None = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")  # Starlette's Headers decode
            elif name == b"content-length" and value.isdigit():
                declared = int(value)
            elif name == b"transfer-encoding":
                chunked = True
        close = chunked or (declared or 0) > _KEEP_ALIVE_BODY
        if not _public(scope):
            problem = bearer_problem(authorization, self.expected)
            if problem is not None:
                headers = {"WWW-Authenticate": "Bearer"}
                if close:
                    headers["Connection"] = "close"
                await JSONResponse({"detail": problem}, 401, headers)(scope, receive, send)
                return
        too_large = f"request body over the {self.max_bytes} byte limit (max_request_size)"
        if declared is not None and declared > self.max_bytes:
            headers = {"Connection": "close"}
            await JSONResponse({"detail": too_large}, 413, headers)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # An HTTPException: FastAPI's body parsing passes it on (any other
                    # exception there becomes a generic 400).
                    raise HTTPException(413, too_large, headers={"Connection": "close"})
            return message

        await self.app(scope, limited, send)
