"""Detect whether an S3 endpoint honours conditional writes, once per endpoint and bucket.

A create-only PUT is sent twice to a fresh probe key: an endpoint that answers the second
with 412 honours `If-None-Match` on PUT. The same is then tried on CompleteMultipartUpload
(moto's server ignores it there; MinIO and AWS honour it).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from .errors import UnsafeBackend, is_conflict, raise_s3

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PROBE_PREFIX = "_flowledger/probe/"


@dataclass(frozen=True)
class Capabilities:
    conditional_put: bool
    conditional_multipart: bool


_cache: dict[tuple[str, str], Capabilities] = {}
_lock = threading.Lock()


def _conflicts(call: Any) -> bool:
    try:
        call()
    except ClientError as exc:
        if is_conflict(exc):
            return True
        raise
    return False


def cached(endpoint: str, bucket: str) -> Capabilities | None:
    with _lock:
        return _cache.get((endpoint, bucket))


def probe(client: S3Client, bucket: str, prefix: str, endpoint: str) -> Capabilities:
    """Probe (or return the cached answer for) `endpoint`/`bucket`."""
    cache_key = (endpoint, bucket)
    known = cached(endpoint, bucket)
    if known is not None:
        return known
    key = f"{prefix}{PROBE_PREFIX}{uuid.uuid4().hex}"
    uri = f"s3://{bucket}/{key}"
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"1", IfNoneMatch="*")
        put_ok = _conflicts(
            lambda: client.put_object(Bucket=bucket, Key=key, Body=b"2", IfNoneMatch="*")
        )
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        try:
            etag = client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"3"
            )["ETag"]
            mpu_ok = _conflicts(
                lambda: client.complete_multipart_upload(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]},
                    IfNoneMatch="*",
                )
            )
        finally:
            # Fails harmlessly when the upload already completed (the condition was ignored).
            with contextlib.suppress(ClientError):
                client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        client.delete_object(Bucket=bucket, Key=key)
    except (ClientError, BotoCoreError) as exc:
        raise_s3(exc, uri, endpoint, "capability check")
    caps = Capabilities(put_ok, mpu_ok)
    with _lock:
        _cache[cache_key] = caps
    return caps


def require_conditional_put(
    caps: Capabilities, endpoint: str, bucket: str, allow_unsafe: bool
) -> None:
    if not caps.conditional_put and not allow_unsafe:
        raise UnsafeBackend(
            f"S3 endpoint {endpoint} (bucket {bucket}) ignores conditional writes "
            "(If-None-Match: a second create-only PUT succeeded), so commits cannot be atomic; "
            "use AWS S3 or a recent MinIO, or set FLOWLEDGER_ALLOW_UNSAFE=1 to run unsafely",
            f"s3://{bucket}",
        )


def require_conditional_multipart(
    caps: Capabilities, endpoint: str, bucket: str, allow_unsafe: bool
) -> None:
    if not caps.conditional_multipart and not allow_unsafe:
        raise UnsafeBackend(
            f"S3 endpoint {endpoint} (bucket {bucket}) ignores If-None-Match on "
            "CompleteMultipartUpload, so a create-only streaming upload could overwrite "
            "another writer's object; write it to a unique key instead, or set "
            "FLOWLEDGER_ALLOW_UNSAFE=1 to run unsafely",
            f"s3://{bucket}",
        )


def forget() -> None:
    """Drop cached answers (tests that restart servers on the same port)."""
    with _lock:
        _cache.clear()
