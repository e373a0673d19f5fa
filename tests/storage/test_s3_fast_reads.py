"""GETs and HEADs past botocore (storage/s3_fast.py): the happy answers come from the fast
path; every other answer is sent again through botocore and ends as it did before."""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from storage import (
    AccessDenied,
    NotFound,
    RangeNotSatisfiable,
    S3ObjectStore,
    StoreSettings,
    open_store,
)
from storage.s3_fast import FastReads
from tests.support.proxy import FAIL_503, FORWARD, FaultProxy
from tests.support.servers import S3Endpoint


def _store(endpoint: S3Endpoint, **overrides: object) -> S3ObjectStore:
    store = open_store(f"s3://{endpoint.new_bucket()}/repo", endpoint.settings(**overrides))
    assert isinstance(store, S3ObjectStore)
    return store


def _no_botocore_reads(store: S3ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**kwargs: Any) -> Any:
        raise AssertionError(f"botocore was asked: {kwargs}")

    monkeypatch.setattr(store.client, "get_object", refuse)
    monkeypatch.setattr(store.client, "head_object", refuse)


@pytest.mark.minio
def test_reads_on_minio_take_the_fast_path(
    minio: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(minio)
    body = bytes(range(256)) * 40
    info = store.put("dir/obj", body)
    scoped = store.scoped("dir")  # views share the fast path
    _no_botocore_reads(store, monkeypatch)
    store.stats.reset()
    assert scoped.get("obj", 100, 1000) == body[100:1100]
    assert scoped.get("obj") == body
    assert scoped.get("obj", 10_000) == body[10_000:]
    head = scoped.head("obj")
    assert (head.size, head.etag) == (len(body), info.etag)
    assert head.last_modified is not None and head.last_modified.utcoffset() is not None
    with pytest.raises(NotFound):
        scoped.get("missing", 0, 10)
    with pytest.raises(NotFound):
        scoped.head("missing")
    assert not scoped.exists("missing")
    assert store.stats.snapshot() == {"GET": 4, "HEAD": 3}  # each sent once


@pytest.mark.minio
def test_fast_reads_return_the_stored_bytes_never_decoded(
    minio: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object stored with a Content-Encoding comes back as stored, as from botocore."""
    store = _store(minio)
    packed = gzip.compress(b"x" * 1000)
    store.client.put_object(
        Bucket=store.bucket, Key=store.prefix + "packed", Body=packed, ContentEncoding="gzip"
    )
    _no_botocore_reads(store, monkeypatch)
    assert store.get("packed") == packed
    assert store.get("packed", 2, 8) == packed[2:10]


@pytest.mark.minio
def test_other_answers_are_botocores(minio: S3Endpoint) -> None:
    store = _store(minio)
    store.put("obj", b"0123456789")
    store.stats.reset()
    with pytest.raises(RangeNotSatisfiable):
        store.get("obj", 50, 10)  # 416: sent again through botocore, translated there
    assert store.stats.snapshot() == {"GET": 2}
    wrong = _store(minio, secret_access_key="wrong-secret")
    with pytest.raises(AccessDenied):  # 403: botocore translates it, as before
        wrong.get("obj", 0, 4)


@pytest.mark.s3
def test_a_failed_fast_read_is_retried_by_botocore(moto: S3Endpoint) -> None:
    proxy = FaultProxy(moto.endpoint)
    try:
        store = _store(moto, endpoint_url=proxy.endpoint, attempts_maximum=3)
        store.put("obj", b"payload")
        failed: list[str] = []

        def rule(method: str, path: str, headers: dict[str, str]) -> str:
            if method == "GET" and path.endswith("/obj") and len(failed) < 2:
                failed.append(path)
                return FAIL_503
            return FORWARD

        proxy.rule = rule
        proxy.seen.clear()
        assert store.get("obj", 0, 3) == b"pay"
        # fast path: 503; botocore: 503, then retried with backoff -> the bytes
        assert [a for m, p, a in proxy.seen if m == "GET"] == [FAIL_503, FAIL_503, FORWARD]
    finally:
        proxy.stop()


@pytest.mark.unit
def test_fast_path_only_where_its_request_is_botocores(monkeypatch: pytest.MonkeyPatch) -> None:
    keys: dict[str, Any] = {"access_key_id": "k", "secret_access_key": "s"}
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert FastReads.for_settings(StoreSettings(endpoint_url="http://127.0.0.1:9", **keys))
    assert FastReads.for_settings(StoreSettings(endpoint_url=None, **keys)) is None  # AWS
    off = StoreSettings(endpoint_url="http://127.0.0.1:9", fast_reads=False, **keys)
    assert FastReads.for_settings(off) is None
    virtual = StoreSettings(endpoint_url="http://127.0.0.1:9", path_style_access=False, **keys)
    assert FastReads.for_settings(virtual) is None
    no_keys = StoreSettings(
        endpoint_url="http://127.0.0.1:9", access_key_id=None, secret_access_key=None
    )
    assert FastReads.for_settings(no_keys) is None  # a credential chain: botocore's
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert FastReads.for_settings(StoreSettings(endpoint_url="http://10.1.2.3:9", **keys)) is None
