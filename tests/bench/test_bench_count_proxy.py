"""The counting proxy the upsert benchmark puts in front of MinIO: requests pass unchanged (SigV4
still verifies, conditional writes still conflict), and each is counted by kind with its bytes —
also when the client drops the connection in the middle of an answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from botocore.exceptions import ClientError

from bench.s3_count_proxy import CountingProxy, count, kind_of
from tests.support.servers import S3Endpoint


@pytest.fixture
def proxied(minio: S3Endpoint) -> Iterator[tuple[CountingProxy, S3Endpoint]]:
    proxy = CountingProxy(minio.endpoint)
    yield proxy, replace(minio, endpoint=proxy.endpoint)
    proxy.stop()


@pytest.mark.minio
def test_requests_pass_unchanged_and_are_counted(
    proxied: tuple[CountingProxy, S3Endpoint], minio: S3Endpoint
) -> None:
    proxy, via = proxied
    bucket = minio.new_bucket()
    s3 = via.client()
    body = b"x" * 300_000
    s3.put_object(Bucket=bucket, Key="a/1", Body=body)
    assert s3.get_object(Bucket=bucket, Key="a/1")["Body"].read() == body
    assert s3.head_object(Bucket=bucket, Key="a/1")["ContentLength"] == len(body)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="a/")["Contents"]] == ["a/1"]
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="a/none")
    assert missing.value.response["Error"]["Code"] == "404"
    with pytest.raises(ClientError) as taken:
        s3.put_object(Bucket=bucket, Key="a/1", Body=b"y", IfNoneMatch="*")
    assert taken.value.response["Error"]["Code"] == "PreconditionFailed"
    # What went through landed on the server itself.
    assert minio.client().get_object(Bucket=bucket, Key="a/1")["Body"].read() == body

    counts = count(proxy.records)
    assert counts.by_kind == {"PUT": 2, "GET": 1, "HEAD": 2, "LIST": 1}
    assert counts.errors == {404: 1, 412: 1}
    assert counts.bytes_up == len(body) + 1
    assert counts.bytes_down >= len(body)
    first, last = proxy.records[0], proxy.records[-1]
    assert proxy.between(first.start, last.start).total == 6
    assert proxy.between(last.end + 1, last.end + 2).total == 0


@pytest.mark.minio
def test_a_client_that_leaves_mid_answer_is_counted_and_the_proxy_goes_on(
    proxied: tuple[CountingProxy, S3Endpoint], minio: S3Endpoint
) -> None:
    proxy, via = proxied
    bucket = minio.new_bucket()
    s3 = via.client()
    s3.put_object(Bucket=bucket, Key="big", Body=b"z" * (8 << 20))
    stream = s3.get_object(Bucket=bucket, Key="big")["Body"]
    stream.read(10)
    stream.close()  # drops the connection with most of the answer unsent
    assert s3.get_object(Bucket=bucket, Key="big", Range="bytes=0-3")["Body"].read() == b"zzzz"
    # The dropped answer is recorded once the proxy's write into the closed socket fails,
    # which may come after the next request's answer.
    deadline = time.monotonic() + 30
    while len(proxy.records) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    kinds = [r.kind for r in proxy.records]
    assert kinds.count("GET") == 2
    assert kinds.count("PUT") == 1


@pytest.mark.unit
def test_kinds_from_path_style_targets() -> None:
    assert kind_of("GET", "/bucket?list-type=2&prefix=a%2F") == "LIST"
    assert kind_of("GET", "/bucket/") == "LIST"
    assert kind_of("GET", "/bucket/key/part") == "GET"
    assert kind_of("GET", "/bucket?location") == "GET"
    assert kind_of("PUT", "/bucket/key?partNumber=1&uploadId=u") == "PUT"
