"""Unconditional uploads through obstore (storage/s3_uploads.py), against moto's server and
MinIO: bodies round-trip with their checksums in the requests boto3 would send, while
create-only writes keep their guarantees (boto3), an unreachable endpoint is a clear error and
a failed multipart upload leaves nothing."""

from __future__ import annotations

import os
import socket
import zlib
from collections import Counter
from typing import Any

import pytest

from storage import (
    Conflict,
    EndpointUnreachable,
    S3ObjectStore,
    StoreSettings,
    open_store,
)
from storage.s3_uploads import ObstoreWriter
from tests.support.servers import S3Endpoint

MiB = 1 << 20
PART = 5 * MiB


@pytest.fixture(
    params=[
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("minio", marks=pytest.mark.minio),
    ]
)
def endpoint(request: pytest.FixtureRequest) -> S3Endpoint:
    """moto's server (s3 tier) or MinIO (minio tier)."""
    fixture = "moto" if request.param == "s3" else "minio"
    server: S3Endpoint = request.getfixturevalue(fixture)
    return server


def _store(endpoint: S3Endpoint, client: str, bucket: str | None = None) -> S3ObjectStore:
    settings = endpoint.settings(upload_client=client, multipart_size=PART)
    store = open_store(f"s3://{bucket or endpoint.new_bucket()}/repo", settings)
    assert isinstance(store, S3ObjectStore)
    return store


def _botocore_sends(store: S3ObjectStore) -> Counter[str]:
    """The operations boto3's client sends from now on."""
    sent: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        sent[model.name] += 1

    store.client.meta.events.register("before-call.s3", note)
    return sent


def _write(store: S3ObjectStore, key: str, body: bytes) -> tuple[str, int]:
    """Write `body` in uneven pieces; (ETag, CRC-32 of what was written)."""
    crc = 0
    with store.open_writer(key) as w:
        for i in range(0, len(body), 3 * MiB + 7):
            piece = body[i : i + 3 * MiB + 7]
            w.write(piece)
            crc = zlib.crc32(piece, crc)
    return store.head(key).etag, crc


def test_data_file_bodies_go_through_obstore_in_the_requests_boto3_sends(
    endpoint: S3Endpoint,
) -> None:
    body = os.urandom(2 * PART + MiB)  # three parts
    small = os.urandom(MiB)  # one PUT
    counts = {}
    for client in ("boto3", "obstore"):
        store = _store(endpoint, client)
        sent = _botocore_sends(store)
        store.stats.reset()
        probe = store.open_writer("probe")
        assert isinstance(probe, ObstoreWriter) == (client == "obstore")
        probe.abort()
        etag, crc = _write(store, "data/big.parquet", body)
        _write(store, "data/small.parquet", small)
        store.put("data/whole", small)
        counts[client] = store.stats.snapshot()
        got = store.get("data/big.parquet")
        assert zlib.crc32(got) == crc == zlib.crc32(body)
        assert etag.strip('"').endswith("-3")  # a multipart upload of three parts
        assert store.get("data/small.parquet") == small == store.get("data/whole")
        uploads = {"PutObject", "CreateMultipartUpload", "UploadPart"}
        assert bool(uploads & set(sent)) == (client == "boto3")
        assert store.upload_budget.held == 0  # every part's memory given back
    assert counts["obstore"] == counts["boto3"]  # no more requests than boto3 sends


def test_create_only_stays_create_only(endpoint: S3Endpoint) -> None:
    store = _store(endpoint, "obstore")
    store.put("data/f", b"first")
    with pytest.raises(Conflict) as err, store.open_writer("data/f", if_none_match=True) as w:
        w.write(b"second")
    assert "data/f" in str(err.value)
    with pytest.raises(Conflict), store.open_writer("data/f", if_none_match=True) as w:
        w.write(os.urandom(PART + 1))  # a multipart upload, completed only if absent
    with pytest.raises(Conflict):
        store.put_if_absent("data/f", b"third")
    assert store.get("data/f") == b"first"


class _Failed(Exception):
    pass


def test_a_failed_multipart_upload_leaves_nothing(endpoint: S3Endpoint) -> None:
    store = _store(endpoint, "obstore")
    with pytest.raises(_Failed), store.open_writer("data/f.parquet") as w:
        w.write(os.urandom(2 * PART + 1))  # two parts sent, the third buffered
        raise _Failed
    assert list(store.list("data/")) == []
    pending = store.client.list_multipart_uploads(Bucket=store.bucket)
    assert pending.get("Uploads", []) == []
    assert store.upload_budget.held == 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.unit
def test_an_unreachable_endpoint_is_a_clear_error_naming_the_object() -> None:
    settings = StoreSettings(
        endpoint_url=f"http://127.0.0.1:{_closed_port()}",
        access_key_id="k",
        secret_access_key="s",
        multipart_size=PART,
        attempts_maximum=1,
        upload_client="obstore",
    )
    store = open_store("s3://unreachable/repo", settings)
    with pytest.raises(EndpointUnreachable) as err:
        store.put("data/whole", b"x")
    assert "s3://unreachable/repo/data/whole" in str(err.value)
    assert "cannot reach S3 endpoint" in str(err.value)
    with pytest.raises(EndpointUnreachable) as err, store.open_writer("data/big") as w:
        w.write(os.urandom(2 * PART))
    assert "s3://unreachable/repo/data/big" in str(err.value)


@pytest.mark.unit
def test_the_upload_client_is_a_setting() -> None:
    assert StoreSettings().upload_client in ("obstore", "boto3")
    with pytest.raises(ValueError, match="upload_client"):
        StoreSettings(upload_client="curl")  # type: ignore[arg-type]
