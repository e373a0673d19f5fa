"""Endpoints fail fast and say what happened: a closed port and a hung endpoint,
on plain sockets of this machine (no S3 server needed)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from storage import (
    EndpointTimeout,
    EndpointUnreachable,
    ObjectStore,
    StoreSettings,
    UnknownOutcome,
    capability,
    open_store,
)

pytestmark = pytest.mark.unit


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()  # nothing listens there any more: connections are refused
    return port


@pytest.fixture
def hung_port() -> Iterator[int]:
    """Accepts connections and never answers (a wedged server)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield int(server.getsockname()[1])
    stop.set()
    t.join()
    for c in accepted:
        c.close()
    server.close()


def _store(port: int) -> ObjectStore:
    settings = StoreSettings(
        endpoint_url=f"http://127.0.0.1:{port}",
        access_key_id="test",
        secret_access_key="test",
        connection_establish_timeout=2,
        connection_timeout=1,
        read_back_timeout=2,
    )
    return open_store("s3://bucket/repo", settings)


@pytest.mark.timeout(30)
def test_closed_port_fails_fast_as_unreachable() -> None:
    store = _store(_closed_port())
    for op in (lambda: list(store.list("")), lambda: store.get("k"), lambda: store.put("k", b"x")):
        with pytest.raises(EndpointUnreachable) as err:
            op()
        assert not isinstance(err.value, EndpointTimeout)
        assert "cannot reach S3 endpoint http://127.0.0.1:" in str(err.value)


@pytest.mark.timeout(30)
def test_hung_endpoint_fails_within_the_timeout_and_a_read_is_not_an_unknown_write(
    hung_port: int,
) -> None:
    store = _store(hung_port)
    with pytest.raises(EndpointTimeout) as err:
        list(store.list(""))
    msg = str(err.value)
    assert msg.startswith("list s3://bucket/repo") and "no answer from S3 endpoint" in msg
    assert "may or may not" not in msg
    with pytest.raises(EndpointTimeout):
        store.get("k")
    with pytest.raises(EndpointTimeout):
        store.head("k")


@pytest.mark.timeout(30)
def test_hung_endpoint_during_a_write_is_an_unknown_outcome(
    hung_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(hung_port)
    with pytest.raises(UnknownOutcome, match="may or may not have been applied"):
        store.put("k", b"x")
    # A conditional write reads back first; a hung read-back leaves the outcome unknown too.
    monkeypatch.setattr(
        capability.Known,
        "get",
        lambda self, endpoint, bucket, ttl: capability.Capabilities(True, True),
    )
    with pytest.raises(UnknownOutcome):
        store.put_if_absent("k", b"x")


@pytest.mark.timeout(60)
def test_cli_on_a_closed_port_says_so_on_one_line() -> None:
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }
    cmd = [sys.executable, "-m", "flowledger", "table", "read", "s3://bucket/tables/t"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 7  # unavailable
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "cannot reach S3 endpoint" in lines[0] and "may or may not" not in lines[0]
