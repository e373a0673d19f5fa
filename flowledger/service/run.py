"""Run the app with uvicorn; print the bound address (port 0 picks a free one)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys

from fastapi import FastAPI

from storage import resolve_repo

from .app import create_app
from .auth import announce, resolve_token
from .connections import GuardedHttpProtocol, configure
from .settings import ServiceSettings

#: asyncio's loop, not uvloop: uvloop (libuv) accepts one connection per loop iteration, so
#: when 50 clients connect at once while earlier ones keep the loop busy, the last waits for
#: ~50 iterations (150-280 ms measured); asyncio accepts all pending connections at once.
#: uvloop saved ~7 % of CPU per lookup; see docs/benchmarks.md, "The service".
LOOP = "asyncio"

#: How `serve --workers N` hands the repository and settings to its worker processes
#: (spawned by uvicorn, which imports the app factory below by name).
_WORKER_ENV = "FLOWLEDGER_SERVE_WORKER"


def worker_app() -> FastAPI:
    """The app of one `--workers` process (uvicorn calls this factory in each worker)."""
    spec = json.loads(os.environ[_WORKER_ENV])
    settings = ServiceSettings(**spec["settings"])
    configure(settings)  # this process's connection limits (connections.py)
    return create_app(spec["repo"], settings)


def serve(repo: str | None, settings: ServiceSettings) -> None:
    """Serve until stopped. Connection limits are ours (connections.py), not uvicorn's
    `limit_concurrency`, which answers 503 to requests but still accepts every connection."""
    import uvicorn

    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP; without it uvicorn's separate header and body writes wait ~40 ms for delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if settings.workers == 1:
        protocol = configure(settings)
        app = create_app(repo, settings)
        sock.bind((settings.host, settings.port))
        _bound(settings, sock)
        config = uvicorn.Config(
            app, loop=LOOP, http=protocol, log_level="info", timeout_graceful_shutdown=5
        )
        uvicorn.Server(config).run(sockets=[sock])
        return
    from uvicorn.supervisors import Multiprocess

    # The token is resolved (and a new one printed) once, here; the workers get its value.
    uri = resolve_repo(repo)
    token = resolve_token(settings, uri)
    announce(token)
    shared = dataclasses.replace(settings, token=token.value)
    os.environ[_WORKER_ENV] = json.dumps({"repo": uri, "settings": dataclasses.asdict(shared)})
    sock.bind((settings.host, settings.port))
    _bound(settings, sock)
    config = uvicorn.Config(
        "flowledger.service.run:worker_app",
        factory=True,
        workers=settings.workers,
        loop=LOOP,
        # Imported by name in each worker; worker_app() sets its limits.
        http=f"{GuardedHttpProtocol.__module__}:{GuardedHttpProtocol.__qualname__}",
        log_level="info",
        timeout_graceful_shutdown=5,
    )
    Multiprocess(config, sockets=[sock]).run()


def _bound(settings: ServiceSettings, sock: socket.socket) -> None:
    port = sock.getsockname()[1]
    # One line a supervisor or a test can parse; the token is never part of it.
    print(f"flowledger: serving on http://{settings.host}:{port}", file=sys.stderr, flush=True)
