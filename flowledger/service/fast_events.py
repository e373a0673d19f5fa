"""`GET /nifi-api/provenance-events/{id}` answered in front of the app when memory alone
answers it: the service's hottest read, without FastAPI's per-request machinery.

Why: FastAPI's middleware layers, routing (included routers are matched twice), dependency
solving (token, scheme, services) and response handling cost ~0.3 ms of CPU per request,
more than the lookup itself; with 50 clients on one process that CPU is the queue. This
answers only requests it can answer exactly as the route would, and hands everything else to
the app unchanged: no token or another form of it (the app's 401), a non-canonical id, a
request with a body (the app's size limit), an event not decoded in memory or with a content
claim (availability needs I/O: the route's thread pool), any exception. The body is the
route's own (`memory_entity`), serialized as FastAPI serializes it."""

from __future__ import annotations

import hmac
from collections.abc import Callable

import pydantic_core
from starlette.types import Scope, Send

from .event_routes import memory_entity
from .state import Services

PREFIX = "/nifi-api/provenance-events/"
#: Longer ids are not int64 anyway; the app answers them (404 / 422).
MAX_DIGITS = 18


def event_id(path: str) -> int | None:
    """The id of a canonical `PREFIX<digits>` path (no sign, no leading zero), else None."""
    if not path.startswith(PREFIX):
        return None
    tail = path[len(PREFIX) :]
    if not (0 < len(tail) <= MAX_DIGITS and tail.isascii() and tail.isdigit()):
        return None
    if tail[0] == "0" and len(tail) > 1:
        return None
    return int(tail)


def _plain(scope: Scope) -> bytes | None:
    """The first Authorization header (as Starlette's `Headers.get` reads it), or None when
    the request carries a body."""
    found = None
    for name, value in scope["headers"]:
        if name == b"authorization" and found is None:
            found = bytes(value)
        elif name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return None
    return found


class EventFastPath:
    """Decides, per request, whether the lookup is answered here (`ServiceApp.__call__`)."""

    def __init__(self, token: str, services: Callable[[], Services | None]) -> None:
        # Only the exact form; `bearer x`, extra spaces etc. go to the app's HTTPBearer.
        self._expected = b"Bearer " + token.encode()
        self._services = services

    def answer(self, scope: Scope) -> bytes | None:
        """The JSON body for this request, or None: the app answers it."""
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
            return None
        wanted = event_id(scope["path"])
        if wanted is None:
            return None
        given = _plain(scope)
        if given is None or not hmac.compare_digest(given, self._expected):
            return None
        svc = self._services()
        if svc is None:
            return None
        try:
            entity = memory_entity(svc, wanted)
        except Exception:  # the app answers again, with its error handling
            return None
        return None if entity is None else pydantic_core.to_json(entity)


async def send_json(send: Send, body: bytes) -> None:
    """A 200 with the headers FastAPI's JSON response has (uvicorn adds date and server)."""
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
