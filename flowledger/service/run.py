"""Run the app with uvicorn; print the bound address (port 0 picks a free one)."""

from __future__ import annotations

import socket
import sys

from .app import create_app
from .settings import ServiceSettings


def serve(repo: str | None, settings: ServiceSettings) -> None:
    import uvicorn

    app = create_app(repo, settings)
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP; without it uvicorn's separate header and body writes wait ~40 ms for delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    port = sock.getsockname()[1]
    # One line a supervisor or a test can parse; the token is never part of it.
    print(f"flowledger: serving on http://{settings.host}:{port}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="info", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
