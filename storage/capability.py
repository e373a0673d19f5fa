"""Detect whether an S3 endpoint honours conditional writes, once per endpoint and bucket.

A create-only PUT is sent twice to a fresh probe key: an endpoint that answers the second
with 412 honours `If-None-Match` on PUT. The same is then tried on CompleteMultipartUpload
(moto's server ignores it there; MinIO and AWS honour it).

The answer is kept by the store that asked (`Known`, shared with its scoped views), and a fully
safe answer also on disk per endpoint and bucket for `StoreSettings.capability_cache_ttl`
seconds, so a short-lived CLI process, or another store of the same process, does not pay the
~6 probe requests on every commit. Unsafe answers are never cached on disk: an
endpoint that is refused is asked again next time (it may have been upgraded). The residual risk
is an endpoint replaced by an unsafe one at the same address within the TTL; set the TTL to 0
to probe in every process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from .cache_dir import cache_root, write_atomically
from .errors import UnsafeBackend
from .s3_errors import is_conflict, translate_s3

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PROBE_PREFIX = "_flowledger/probe/"


@dataclass(frozen=True)
class Capabilities:
    conditional_put: bool
    conditional_multipart: bool


def _conflicts(call: Any) -> bool:
    try:
        call()
    except ClientError as exc:
        if is_conflict(exc):
            return True
        raise
    return False


def _disk_path(endpoint: str, bucket: str) -> Path:
    base = cache_root()
    digest = hashlib.sha256(f"{endpoint}\n{bucket}".encode()).hexdigest()[:32]
    return base / "capabilities" / f"{digest}.json"


def _read_disk(endpoint: str, bucket: str, ttl: float) -> Capabilities | None:
    if ttl <= 0:
        return None
    try:
        doc = json.loads(_disk_path(endpoint, bucket).read_text())
        fresh = 0 <= time.time() - float(doc["checked_at"]) < ttl
        same = doc["endpoint"] == endpoint and doc["bucket"] == bucket
        if fresh and same and doc["conditional_put"] is True and doc["conditional_multipart"]:
            return Capabilities(True, True)
    except (OSError, ValueError, KeyError, TypeError):
        pass  # missing, unreadable or foreign: probe again
    return None


def _write_disk(endpoint: str, bucket: str, caps: Capabilities) -> None:
    if not (caps.conditional_put and caps.conditional_multipart):
        return
    doc = {
        "endpoint": endpoint,
        "bucket": bucket,
        "conditional_put": True,
        "conditional_multipart": True,
        "checked_at": time.time(),
    }
    write_atomically(_disk_path(endpoint, bucket), json.dumps(doc).encode())


class Known:
    """One store's answer (shared by its scoped views): known once, from the disk cache or a
    probe, then kept for the store's life."""

    def __init__(self) -> None:
        self._caps: Capabilities | None = None
        self._lock = threading.Lock()

    def get(self, endpoint: str, bucket: str, ttl: float) -> Capabilities | None:
        """The known answer: this store's, else a fresh safe one on disk (`ttl` seconds)."""
        with self._lock:
            if self._caps is None:
                self._caps = _read_disk(endpoint, bucket, ttl)
            return self._caps

    def probe(
        self, client: S3Client, bucket: str, prefix: str, endpoint: str, ttl: float = 0.0
    ) -> Capabilities:
        """Probe `endpoint`/`bucket` (or return the answer once known)."""
        known = self.get(endpoint, bucket, ttl)
        if known is not None:
            return known
        caps = probe(client, bucket, prefix, endpoint, ttl)
        with self._lock:
            self._caps = caps
        return caps


def probe(
    client: S3Client, bucket: str, prefix: str, endpoint: str, ttl: float = 0.0
) -> Capabilities:
    """Probe `endpoint`/`bucket` (about 6 requests); a safe answer is kept on disk."""
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
        raise translate_s3(exc, uri, endpoint, "capability check") from exc
    caps = Capabilities(put_ok, mpu_ok)
    if ttl > 0:
        _write_disk(endpoint, bucket, caps)
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
    """Drop the answers cached on disk (tests that restart servers on one port); a store
    opened later asks again."""
    for path in (cache_root() / "capabilities").glob("*.json"):
        with contextlib.suppress(OSError):
            path.unlink()
