"""GETs and HEADs through obstore (storage/s3_reads.py): definite answers come from obstore;
every other answer is sent again through botocore and ends as it did before."""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING, Any

import pytest

from storage import (
    AccessDenied,
    BucketMissing,
    NotFound,
    RangeNotSatisfiable,
    S3ObjectStore,
    StoreSettings,
    open_store,
)
from storage.s3 import obstore_paths
from storage.s3_reads import make_store
from tests.support.proxy import FAIL_503, FORWARD, FaultProxy
from tests.support.servers import S3Endpoint

if TYPE_CHECKING:
    from obstore.store import S3Store


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
def test_reads_on_minio_go_through_obstore(
    minio: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(minio)
    body = bytes(range(256)) * 40
    info = store.put("dir/obj", body)
    scoped = store.scoped("dir")  # views share the read client
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
def test_reads_return_the_stored_bytes_never_decoded(
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
def test_denied_and_other_answers(minio: S3Endpoint) -> None:
    store = _store(minio)
    store.put("obj", b"0123456789")
    store.stats.reset()
    with pytest.raises(RangeNotSatisfiable):
        store.get("obj", 50, 10)  # 416: sent again through botocore, translated there
    assert store.stats.snapshot() == {"GET": 2}
    wrong = _store(minio, secret_access_key="wrong-secret")
    wrong.stats.reset()
    with pytest.raises(AccessDenied):  # 403: obstore's answer, translated in s3_errors
        wrong.get("obj", 0, 4)
    with pytest.raises(AccessDenied):
        wrong.head("obj")
    missing = open_store("s3://no-such-bucket-here/repo", minio.settings())
    with pytest.raises(BucketMissing):  # botocore's answer names the bucket
        missing.get("obj", 0, 4)


@pytest.mark.s3
def test_a_failed_read_is_retried_by_botocore(moto: S3Endpoint) -> None:
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
        # obstore (no retries of its own): 503; botocore: 503, then retried -> the bytes
        assert [a for m, p, a in proxy.seen if m == "GET"] == [FAIL_503, FAIL_503, FORWARD]
    finally:
        proxy.stop()


def _made(settings: StoreSettings) -> S3Store:
    store = make_store(settings, "b")
    assert store is not None
    return store


@pytest.mark.unit
def test_every_endpoint_style_and_credential_source_boto3_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys: dict[str, Any] = {"access_key_id": "k", "secret_access_key": "s"}
    minio = _made(StoreSettings(endpoint_url="http://127.0.0.1:9", **keys))
    assert minio.config["endpoint"] == "http://127.0.0.1:9"
    assert minio.config["virtual_hosted_style_request"] == "false"
    assert minio.client_options["allow_http"] == "true"
    aws = _made(StoreSettings(endpoint_url=None, region="eu-west-1", **keys))
    assert aws.config["virtual_hosted_style_request"] == "true"  # boto3's "auto" on AWS
    assert "endpoint" not in aws.config
    hosted = StoreSettings(endpoint_url="https://s3.example.com", path_style_access=False, **keys)
    assert _made(hosted).config["endpoint"] == "https://b.s3.example.com"
    # No static keys: boto3's credential chain (environment, profiles, instance roles).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    chain = _made(StoreSettings(endpoint_url=None, access_key_id=None, secret_access_key=None))
    assert chain.credential_provider is not None
    assert "access_key_id" not in chain.config
    off = StoreSettings(endpoint_url="http://127.0.0.1:9", fast_reads=False, **keys)
    assert obstore_paths(off, "b")[0] is None


@pytest.mark.unit
def test_no_credentials_anywhere_leaves_the_answer_to_botocore(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bare = StoreSettings(
        endpoint_url="http://127.0.0.1:9", access_key_id=None, secret_access_key=None
    )
    assert obstore_paths(bare, "b")[0] is None  # botocore: NoCredentials -> AccessDenied
