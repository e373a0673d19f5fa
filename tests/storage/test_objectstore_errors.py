"""Every failure the object-store layer promises to report clearly, against real servers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from storage import (
    AccessDenied,
    BucketMissing,
    Conflict,
    EndpointUnreachable,
    InvalidURI,
    S3ObjectStore,
    StoreSettings,
    UnknownOutcome,
    UnsafeBackend,
    capability,
    open_store,
    parse_uri,
)
from tests.support.proxy import DROP_RESPONSE, FAIL_503, FORWARD, STRIP_CONDITIONS, FaultProxy
from tests.support.servers import S3Endpoint, refused_port


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


@pytest.fixture
def proxy(moto: S3Endpoint) -> Iterator[FaultProxy]:
    p = FaultProxy(moto.endpoint)
    yield p
    p.stop()


def _via_proxy(moto: S3Endpoint, proxy: FaultProxy, **overrides: object) -> S3ObjectStore:
    bucket = moto.new_bucket()
    settings = moto.settings(endpoint_url=proxy.endpoint, attempts_maximum=3, **overrides)
    store = open_store(f"s3://{bucket}/repo", settings)
    assert isinstance(store, S3ObjectStore)
    return store


@pytest.mark.s3
def test_lost_response_of_create_only_is_resolved_by_reading_back(
    moto: S3Endpoint, proxy: FaultProxy
) -> None:
    store = _via_proxy(moto, proxy)
    store.capabilities()
    dropped: list[str] = []

    def rule(method: str, path: str, headers: dict[str, str]) -> str:
        if method == "PUT" and path.endswith("/repo/instant") and not dropped:
            dropped.append(path)
            return DROP_RESPONSE  # lands, but the client sees a reset and retries -> 412
        return FORWARD

    proxy.rule = rule
    info = store.put_if_absent("instant", b"writer-a")
    assert dropped and info.size == len(b"writer-a")
    assert store.get("instant") == b"writer-a"
    assert [a for m, p, a in proxy.seen if m == "PUT" and p.endswith("/instant")] == [
        DROP_RESPONSE,
        FORWARD,
    ]
    # Someone else's object is still a conflict, even after a retried request.
    proxy.seen.clear()
    dropped.clear()
    with pytest.raises(Conflict):
        store.put_if_absent("instant", b"writer-b")


@pytest.mark.s3
def test_lost_response_of_cas_is_resolved_by_reading_back(
    moto: S3Endpoint, proxy: FaultProxy
) -> None:
    store = _via_proxy(moto, proxy)
    first = store.put("ptr", b"v1")
    store.capabilities()
    proxy.rule = lambda m, p, h: DROP_RESPONSE if m == "PUT" and "If-Match" in h else FORWARD
    info = store.put_if_match("ptr", b"v2-from-a", first.etag)
    assert store.get("ptr") == b"v2-from-a" and info.etag != first.etag


@pytest.mark.s3
def test_unknown_outcome_when_nothing_can_be_confirmed(moto: S3Endpoint, proxy: FaultProxy) -> None:
    store = _via_proxy(moto, proxy, read_back_timeout=2)
    store.capabilities()
    proxy.rule = lambda m, p, h: DROP_RESPONSE if p.split("?")[0].endswith("/x") else FORWARD
    with pytest.raises(UnknownOutcome) as err:
        store.put_if_absent("x", b"mine")
    assert "may or may not" in _one_line(err.value) or "could not confirm" in str(err.value)


@pytest.mark.s3
def test_throttling_and_5xx_are_retried(moto: S3Endpoint, proxy: FaultProxy) -> None:
    store = _via_proxy(moto, proxy)
    failures: list[str] = []

    def rule(method: str, path: str, headers: dict[str, str]) -> str:
        if method == "PUT" and len(failures) < 2:
            failures.append(path)
            return FAIL_503
        return FORWARD

    proxy.rule = rule
    store.put("k", b"v")
    assert len(failures) == 2 and store.get("k") == b"v"


@pytest.mark.s3
def test_endpoint_ignoring_conditional_writes_is_refused(
    moto: S3Endpoint, proxy: FaultProxy
) -> None:
    proxy.rule = lambda m, p, h: STRIP_CONDITIONS
    store = _via_proxy(moto, proxy)
    with pytest.raises(UnsafeBackend) as err:
        store.put_if_absent("k", b"v")
    msg = _one_line(err.value)
    assert proxy.endpoint in msg and "FLOWLEDGER_ALLOW_UNSAFE" in msg
    assert not store.exists("k")
    # Unconditional writes never needed the guarantee and still work.
    store.put("plain", b"ok")
    capability.forget()
    unsafe = _via_proxy(moto, proxy, allow_unsafe=True)
    unsafe.put_if_absent("k", b"v")  # explicitly opted in
    assert unsafe.get("k") == b"v"


@pytest.mark.s3
def test_unreachable_endpoint(moto: S3Endpoint) -> None:
    with refused_port() as port:
        settings = moto.settings(endpoint_url=f"http://127.0.0.1:{port}", attempts_maximum=2)
        store = open_store("s3://some-bucket/repo", settings)
        with pytest.raises(EndpointUnreachable) as err:
            store.get("k")
    msg = _one_line(err.value)
    assert f"127.0.0.1:{port}" in msg and "AWS_ENDPOINT_URL" in msg


@pytest.mark.s3
def test_missing_bucket(moto: S3Endpoint) -> None:
    store = open_store("s3://no-such-bucket/repo", moto.settings())
    with pytest.raises(BucketMissing) as err:
        store.put("k", b"v")
    assert "s3://no-such-bucket/repo/k" in _one_line(err.value)
    with pytest.raises(BucketMissing):
        list(store.list())


@pytest.mark.s3
def test_missing_credentials(moto: S3Endpoint) -> None:
    settings = StoreSettings(endpoint_url=moto.endpoint, access_key_id=None, secret_access_key=None)
    store = open_store("s3://b-any/repo", settings)
    with pytest.raises(AccessDenied) as err:
        store.get("k")
    assert "AWS_ACCESS_KEY_ID" in _one_line(err.value)


@pytest.mark.minio
def test_wrong_credentials(minio: S3Endpoint) -> None:
    bucket = minio.new_bucket()
    store = open_store(f"s3://{bucket}/repo", minio.settings(secret_access_key="wrong-secret"))
    with pytest.raises(AccessDenied) as err:
        store.put("k", b"v")
    msg = _one_line(err.value)
    assert "AWS_SECRET_ACCESS_KEY" in msg and minio.endpoint in msg


@pytest.mark.minio
def test_minio_honours_every_conditional_write(minio: S3Endpoint) -> None:
    bucket = minio.new_bucket()
    store = open_store(f"s3://{bucket}/repo", minio.settings())
    assert isinstance(store, S3ObjectStore)
    caps = store.capabilities()
    assert caps.conditional_put and caps.conditional_multipart


@pytest.mark.unit
@pytest.mark.parametrize(
    "uri",
    ["", "http://x/y", "s3://", "s3://Bad_Bucket/x", "file://", "s3://ab/x?y=1", "gs://b/x"],
)
def test_bad_uris_are_refused(uri: str) -> None:
    with pytest.raises(InvalidURI) as err:
        parse_uri(uri)
    assert "\n" not in str(err.value)


@pytest.mark.unit
def test_uri_forms() -> None:
    assert parse_uri("s3a://bucket-1/a/b/").path == "a/b"
    assert parse_uri("s3://bucket-1").path == ""
    assert parse_uri("file:///tmp/x").path == "/tmp/x"
    assert parse_uri("./rel").scheme == "file"


@pytest.mark.s3
def test_cli_prints_one_actionable_line(moto: S3Endpoint) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_ENDPOINT_URL": moto.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    }
    cases = {  # the exit code is the kind's: not found, invalid input
        "s3://missing-bucket/repo": ("bucket does not exist", 4),
        "ftp://x": ("unsupported repository URI scheme", 2),
    }
    for repo, (expected, code) in cases.items():
        out = subprocess.run(
            [sys.executable, "-m", "flowledger", "demo", "--repo", repo],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == code, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], out.stderr
