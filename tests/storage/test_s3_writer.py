"""The S3 backend's streaming upload of a small object: one PUT of the bytes gathered, with
no copy of them made on the way (every data file under one part takes this path)."""

from __future__ import annotations

import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from storage import ObjectInfo, RequestStats, StoreSettings
from storage.s3_calls import S3Calls, S3Object, make_client
from storage.s3_writer import S3Writer

pytestmark = pytest.mark.unit

MiB = 1 << 20


def _writer(sent: list[Any]) -> S3Writer:
    obj = S3Object("k", "repo/k", "s3://b/repo/k")
    settings = StoreSettings(endpoint_url="http://127.0.0.1:9")  # never sent to
    calls = S3Calls(make_client(settings), "b", RequestStats(), ThreadPoolExecutor(1))

    def put_whole(body: bytes | bytearray) -> ObjectInfo:
        sent.append(body)
        return ObjectInfo("k", len(body), '"etag"')

    return S3Writer(calls, obj, settings, False, put_whole)


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


def test_a_small_object_is_not_put_after_an_abort() -> None:
    sent: list[Any] = []
    w = _writer(sent)
    w.write(b"x" * MiB)
    w.abort()
    assert sent == []
