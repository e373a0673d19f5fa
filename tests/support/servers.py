"""Real servers for the test tiers: moto's threaded S3 server and MinIO.

Each server binds port 0 itself and reports the port the kernel gave it: probing for a free port
and starting a server on it later is a race with every other process on the machine."""

from __future__ import annotations

import socket
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

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


class MotoServer:
    """moto's threaded server on 127.0.0.1, on the port the kernel chose when it bound port 0."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()  # returns once the socket is bound and listening
        self.port = int(self._server.get_host_and_port()[1])
        self.endpoint = S3Endpoint("moto", f"http://127.0.0.1:{self.port}", "testing", "testing")

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.endpoint.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def stop(self) -> None:
        self._server.stop()
