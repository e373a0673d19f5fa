"""Real servers for the test tiers: moto's threaded S3 server and MinIO.

Each server binds port 0 itself and reports the port the kernel gave it: probing for a free port
and starting a server on it later is a race with every other process on the machine."""

from __future__ import annotations

import socket
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from storage import StoreSettings


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port where connections are refused: bound (so nobody else can take it) and
    never listened on, for as long as the block runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@dataclass(frozen=True)
class S3Endpoint:
    """An S3 server the tests can open stores on."""

    name: str
    endpoint: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def settings(self, **overrides: object) -> StoreSettings:
        values: dict[str, object] = {
            "endpoint_url": self.endpoint,
            "region": self.region,
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key,
        }
        values.update(overrides)
        return StoreSettings(**values)  # type: ignore[arg-type]

    def client(self):  # type: ignore[no-untyped-def]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}),
        )

    def new_bucket(self) -> str:
        name = f"t-{uuid.uuid4().hex[:20]}"
        self.client().create_bucket(Bucket=name)
        return name


class _AtomicConditionalWrites:
    """WSGI middleware: conditional requests (`If-Match`, `If-None-Match`) one at a time."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if "HTTP_IF_MATCH" not in environ and "HTTP_IF_NONE_MATCH" not in environ:
            return self._app(environ, start_response)
        with self._lock:
            # moto builds the whole response inside the call; list() keeps it inside the lock.
            return list(self._app(environ, start_response))


class MotoServer:
    """moto's S3 app in a threaded werkzeug server on 127.0.0.1, on the port the kernel chose
    when it bound port 0.

    moto checks a conditional write's precondition and then stores the object in two steps, with
    no lock between them, so two threads can both pass `If-Match` on the same etag and the second
    store silently overwrites the first: a lost update that S3 and MinIO never produce. Requests
    carrying `If-Match` or `If-None-Match` therefore run one at a time here; every other request
    stays concurrent."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        app = _AtomicConditionalWrites(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            "127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.port = int(self._server.server_address[1])
        self.endpoint = S3Endpoint("moto", f"http://127.0.0.1:{self.port}", "testing", "testing")

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.endpoint.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10) as answer:
            answer.read()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()
