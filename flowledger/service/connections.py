"""Connections: how many, how long before a request's headers, how large those headers.

uvicorn bounds neither the connections it accepts nor the time a connection may take to send
its headers (its keep-alive timeout stops at the first byte; `limit_concurrency` answers 503 to
requests but still accepts every connection). 20,000 connections that never finish their
headers held every file descriptor: the server could accept nothing, not even `/health`, and
logged a traceback per failed accept. So, per process:

- at most `max_connections` connections (lowered to fit the file descriptor limit, whose soft
  value is raised to the hard one at start). At the limit a new connection closes the idle
  connection that has waited longest (no request in progress: nginx drains idle keep-alive
  connections the same way); when every connection has a request in progress, the new one
  gets `503` with `Retry-After` and is closed.
- a connection must complete a request's headers within `header_timeout_s` of opening (or of
  its previous answer), and within `max_header_size` bytes; else it is closed (431 when too
  large).
- refusals and failed accepts are logged as one line at most every 10 s, with a count.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import OrderedDict
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .settings import ServiceSettings

log = logging.getLogger("flowledger.service")

#: File descriptors kept for everything but client connections: repository files, S3
#: connections, DuckDB, logs.
FD_RESERVE = 256
LOG_EVERY_S = 10.0


class RateLimitedLog:
    """One warning per `every_s` per kind of event, saying how many happened since."""

    def __init__(self, every_s: float = LOG_EVERY_S) -> None:
        self.every_s = every_s
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def event(self, kind: str, message: str) -> None:
        self._count[kind] = self._count.get(kind, 0) + 1
        now = time.monotonic()
        if now - self._last.get(kind, -self.every_s) >= self.every_s:
            n = self._count.pop(kind)
            self._last[kind] = now
            log.warning("%s (%d in the last %g s)", message, n, self.every_s)


class ConnectionLimits:
    """One server's limits and what enforcing them tracks: its connections without a request
    in progress (longest idle first: the one closed to make room) and its rate-limited log.
    `configure` makes a new one per server start; uvicorn builds the protocol by class (by
    name in worker processes), so the class carries it."""

    def __init__(
        self,
        max_connections: int = 1000,
        header_timeout_s: float = 10.0,
        max_header_size: int = 64 * 1024,
    ) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.max_header_size = max_header_size
        #: An ordered set (values unused): O(1) to add, drop, and take the oldest.
        self.idle: OrderedDict[GuardedHttpProtocol, None] = OrderedDict()
        self.events = RateLimitedLog()


def _raw_response(status: str, detail: str, extra: str = "") -> bytes:
    body = ('{"detail":"' + detail + '"}').encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


_BUSY = _raw_response(
    "503 Service Unavailable",
    "too many connections, all with a request in progress: retry later",
    "retry-after: 1\r\n",
)
_HEADERS_TOO_LARGE = _raw_response(
    "431 Request Header Fields Too Large", "request headers over the max_header_size limit"
)


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits above (class attributes: `configure`)."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = self.limits  # fixed for the connection's life
        self._waiting_since = 0.0  # loop time since when no request is in progress
        self._header_bytes = 0
        self._header_timer: asyncio.TimerHandle | None = None

    def _idle(self) -> bool:
        """No request in progress: waiting for (the rest of) a request's headers."""
        return self.cycle is None or self.cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._waiting_since = self.loop.time()
        limits = self._limits
        if len(self.connections) > limits.max_connections and not self._make_room():
            limits.events.event(
                "busy", f"connection refused: {limits.max_connections} connections open"
            )
            self.transport.write(_BUSY)
            self.transport.close()
            return
        limits.idle[self] = None
        self._arm(limits.header_timeout_s)

    def _make_room(self) -> bool:
        """Close the connection idle the longest; False if none is idle. O(1): the idle
        connections are kept in the order they became idle (a flood calls this per accept)."""
        idle = self._limits.idle
        while idle:
            oldest, _ = idle.popitem(last=False)
            if oldest._idle() and not oldest.transport.is_closing():
                self._limits.events.event(
                    "evicted", "closed idle connections to make room for new ones"
                )
                oldest.transport.close()
                return True
        return False

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._limits.idle.pop(self, None)  # a request in progress: never closed to make room

    def _arm(self, delay: float) -> None:
        self._header_timer = self.loop.call_later(delay, self._check_headers)

    def _check_headers(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        timeout = self._limits.header_timeout_s
        if not self._idle():  # a request in progress: the app's own limits apply
            self._arm(timeout)
            return
        waited = self.loop.time() - self._waiting_since
        if waited < timeout:
            self._arm(timeout - waited)
            return
        self._limits.events.event(
            "header-timeout",
            f"closed connections without headers after {timeout:g} s (header_timeout_s)",
        )
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        waiting = self._idle()
        super().data_received(data)
        if not (waiting and self._idle()):
            return  # headers completed in this chunk (what follows is body) or not waiting
        self._header_bytes += len(data)
        if self._header_bytes > self._limits.max_header_size and not self.transport.is_closing():
            self._limits.events.event(
                "header-size", "refused requests with headers over max_header_size"
            )
            self.transport.write(_HEADERS_TOO_LARGE)
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._waiting_since = self.loop.time()
        self._header_bytes = 0
        if self._idle() and not self.transport.is_closing():  # not a pipelined next request
            self._limits.idle[self] = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self._limits.idle.pop(self, None)
        super().connection_lost(exc)


def fd_limit() -> int:
    """Raise the soft file descriptor limit to the hard one (Linux's default soft limit, 1024,
    is far below what a server needs); the soft limit in effect."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def configure(settings: ServiceSettings) -> type[GuardedHttpProtocol]:
    """Set this process's limits (the fd limit raised first) and quiet failed accepts; the
    protocol class to hand to uvicorn."""
    fds = fd_limit()
    cap = max(1, min(settings.max_connections, fds - FD_RESERVE))
    if cap < settings.max_connections:
        log.warning("max_connections lowered to %d to fit the file descriptor limit (%d)", cap, fds)
    limits = ConnectionLimits(cap, settings.header_timeout_s, settings.max_header_size)
    GuardedHttpProtocol.limits = limits
    _quiet_accept_errors(limits.events)
    return GuardedHttpProtocol


class _AcceptErrors(logging.Filter):
    """asyncio logs every failed accept (EMFILE, ENFILE, ENOBUFS) with a traceback and
    retries a second later: under a connection flood that filled 160 MB of log. One line per
    10 s instead."""

    def __init__(self, events: RateLimitedLog) -> None:
        super().__init__()
        self.events = events

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("socket.accept() out of system resource"):
            return True
        error = record.exc_info[1] if record.exc_info else None
        self.events.event("accept", f"cannot accept connections: {error or 'out of resources'}")
        return False


def _quiet_accept_errors(events: RateLimitedLog) -> None:
    """The asyncio logger's accept filter, reporting to `events` (one filter: a later server
    start replaces the earlier one's)."""
    logger = logging.getLogger("asyncio")
    for old in [f for f in logger.filters if isinstance(f, _AcceptErrors)]:
        logger.removeFilter(old)
    logger.addFilter(_AcceptErrors(events))
