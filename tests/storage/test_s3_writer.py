"""The S3 backend's streaming upload of a small object: one PUT of the bytes gathered, with
no copy of them made on the way (every data file under one part takes this path), signed
over its payload or not as `StoreSettings.payload_signing` says."""

from __future__ import annotations

import hashlib
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from storage import ObjectInfo, RequestStats, StoreSettings, open_store
from storage.s3_calls import S3Calls, S3Object, make_client
from storage.s3_writer import S3Writer
from storage.upload_buffers import MemoryBudget
from tests.support.proxy import FORWARD, FaultProxy
from tests.support.servers import S3Endpoint

MiB = 1 << 20


def _writer(sent: list[Any]) -> S3Writer:
    obj = S3Object("k", "repo/k", "s3://b/repo/k")
    settings = StoreSettings(endpoint_url="http://127.0.0.1:9")  # never sent to
    calls = S3Calls(make_client(settings), "b", RequestStats(), ThreadPoolExecutor(1))

    def put_whole(body: bytes | bytearray) -> ObjectInfo:
        sent.append(body)
        return ObjectInfo("k", len(body), '"etag"')

    return S3Writer(calls, obj, settings, False, put_whole, MemoryBudget())


@pytest.mark.unit
def test_a_small_object_is_put_whole_from_its_buffer_without_a_copy() -> None:
    sent: list[Any] = []
    w = _writer(sent)
    pieces = [bytes([i]) * MiB for i in range(4)]
    for piece in pieces:
        w.write(piece)
    tracemalloc.start()
    try:
        info = w.commit()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(sent) == 1 and bytes(sent[0]) == b"".join(pieces)
    assert info.size == 4 * MiB
    assert peak < MiB, f"committing copied the {4 * MiB} bytes gathered ({peak} bytes allocated)"


@pytest.mark.unit
def test_a_small_object_is_not_put_after_an_abort() -> None:
    sent: list[Any] = []
    w = _writer(sent)
    w.write(b"x" * MiB)
    w.abort()
    assert sent == []


@pytest.mark.s3
@pytest.mark.parametrize("fast_puts", [True, False], ids=["obstore", "botocore"])
@pytest.mark.parametrize(("signing", "sent"), [(None, "hash"), (False, "UNSIGNED-PAYLOAD")])
def test_payload_signing_is_a_setting(
    moto: S3Endpoint, signing: bool | None, sent: str, fast_puts: bool
) -> None:
    """Either client signs a PUT's body as the setting says (seen on the wire: over plain
    http both sign it by default)."""
    proxy = FaultProxy(moto.endpoint)
    seen: list[str] = []

    def rule(method: str, path: str, headers: dict[str, str]) -> str:
        if method == "PUT":
            seen.append({k.lower(): v for k, v in headers.items()}["x-amz-content-sha256"])
        return FORWARD

    proxy.rule = rule
    try:
        settings = moto.settings(
            endpoint_url=proxy.endpoint, payload_signing=signing, fast_puts=fast_puts
        )
        store = open_store(f"s3://{moto.new_bucket()}/repo", settings)
        body = b"payload " * 100_000
        with store.open_writer("a/f.bin") as w:
            w.write(body)
        assert store.get("a/f.bin") == body
    finally:
        proxy.stop()
    expected = hashlib.sha256(body).hexdigest() if sent == "hash" else sent
    assert seen == [expected]
