"""Streaming multipart upload for the S3 backend: bounded memory, parts uploaded in parallel,
server-side part copies for `compose`, and read-back resolution of a lost completion."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from .errors import Conflict, StorageError, is_conflict, is_outcome_unknown, retry_attempts
from .objectstore import ByteRange, ObjectInfo, ObjectWriter

if TYPE_CHECKING:
    from .s3 import S3ObjectStore

_AWS_ERRORS = (ClientError, BotoCoreError)


def _multipart_etag(part_etags: Sequence[str]) -> str:
    digest = hashlib.md5(
        b"".join(bytes.fromhex(e.strip('"')) for e in part_etags), usedforsecurity=False
    )
    return f'"{digest.hexdigest()}-{len(part_etags)}"'


class S3Writer(ObjectWriter):
    """Multipart upload: at most `fast_upload_active_blocks` parts in flight plus one buffer."""

    def __init__(self, store: S3ObjectStore, key: str, if_none_match: bool) -> None:
        self._store = store
        self._key = key
        self._full = store._full(key)
        self._if_none_match = if_none_match
        self._part_size = store.settings.multipart_size
        self._buf = bytearray()
        self._upload_id: str | None = None
        self._parts: list[Future[str]] = []
        self._slots = threading.BoundedSemaphore(store.settings.fast_upload_active_blocks)
        self._done = False
        self._size = 0

    def _fail(self, exc: BaseException, op: str) -> StorageError:
        return self._store._fail(exc, self._key, op)

    def _ensure_upload(self) -> str:
        if self._upload_id is None:
            self._store.stats.add("MPU_CREATE")
            try:
                resp = self._store.client.create_multipart_upload(
                    Bucket=self._store.bucket, Key=self._full
                )
            except _AWS_ERRORS as exc:
                raise self._fail(exc, "multipart upload") from exc
            self._upload_id = resp["UploadId"]
        return self._upload_id

    def _submit(self, call: Any) -> None:
        upload_id = self._ensure_upload()
        number = len(self._parts) + 1
        self._slots.acquire()

        def run() -> str:
            try:
                return cast(str, call(upload_id, number))
            finally:
                self._slots.release()

        self._parts.append(self._store._pool.submit(run))

    def end_part(self) -> None:
        """Upload what is buffered as one part (compose uses this to place part boundaries)."""
        if not self._buf:
            return
        body, self._buf = self._buf, bytearray()  # handed over, not copied
        store = self._store

        def upload(upload_id: str, number: int) -> str:
            store.stats.add("MPU_PART")
            try:
                resp = store.client.upload_part(
                    Bucket=store.bucket,
                    Key=self._full,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=body,  # type: ignore[arg-type]  # botocore sends bytearray as is
                )
            except _AWS_ERRORS as exc:
                raise self._fail(exc, "upload part") from exc
            return resp["ETag"]

        self._submit(upload)

    def copy_part(self, src: ByteRange) -> None:
        assert src.length is not None and not self._buf
        self._size += src.length
        store = self._store
        source = {"Bucket": store.bucket, "Key": store._full(src.key)}
        rng = f"bytes={src.start}-{src.start + src.length - 1}"

        def copy(upload_id: str, number: int) -> str:
            store.stats.add("MPU_COPY")
            try:
                resp = store.client.upload_part_copy(
                    Bucket=store.bucket,
                    Key=self._full,
                    UploadId=upload_id,
                    PartNumber=number,
                    CopySource=source,  # type: ignore[arg-type]
                    CopySourceRange=rng,
                )
            except _AWS_ERRORS as exc:
                raise self._fail(exc, "upload part copy") from exc
            return resp["CopyPartResult"]["ETag"]

        self._submit(copy)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._done:
            raise StorageError(f"write to {self._store.url(self._key)} after commit/abort")
        view = memoryview(data).cast("B")
        while view:
            take = min(len(view), self._part_size - len(self._buf))
            self._buf += view[:take]
            self._size += take
            view = view[take:]
            if len(self._buf) >= self._part_size:
                self.end_part()
        return len(data)

    def commit(self) -> ObjectInfo:
        if self._done:
            raise StorageError(f"commit of {self._store.url(self._key)} after commit/abort")
        self._done = True
        store = self._store
        if self._upload_id is None:  # small object: one PUT instead of a multipart upload
            data = bytes(self._buf)
            if self._if_none_match:
                return store.put_if_absent(self._key, data)
            return store.put(self._key, data)
        try:
            self.end_part()
            etags = [f.result() for f in self._parts]
        except BaseException:
            self._abort_upload()
            raise
        parts = [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]
        kwargs: dict[str, Any] = {
            "Bucket": store.bucket,
            "Key": self._full,
            "UploadId": self._upload_id,
            "MultipartUpload": {"Parts": parts},
        }
        if self._if_none_match:
            kwargs["IfNoneMatch"] = "*"
        store.stats.add("MPU_COMPLETE")
        try:
            resp = store.client.complete_multipart_upload(**kwargs)
        except ClientError as exc:
            if is_conflict(exc):
                if retry_attempts(exc) > 0 and self._landed(etags):
                    return store.head(self._key)
                self._abort_upload()
                raise Conflict(
                    f"put-if-absent {store.url(self._key)}: object already exists; "
                    "another writer won",
                    store.url(self._key),
                ) from exc
            self._abort_upload()
            raise self._fail(exc, "complete multipart upload") from exc
        except BotoCoreError as exc:
            if is_outcome_unknown(exc) and self._landed(etags):
                return store.head(self._key)
            raise self._fail(exc, "complete multipart upload") from exc
        return ObjectInfo(self._key, self._size, resp["ETag"])

    def _landed(self, etags: Sequence[str]) -> bool:
        try:
            return self._store.head(self._key).etag == _multipart_etag(etags)
        except StorageError:
            return False

    def _abort_upload(self) -> None:
        if self._upload_id is None:
            return
        for f in self._parts:
            f.cancel()
        for f in self._parts:
            with contextlib.suppress(BaseException):
                f.result()
        # Best effort: a bucket lifecycle rule removes uploads that could not be aborted.
        with contextlib.suppress(*_AWS_ERRORS):
            self._store.client.abort_multipart_upload(
                Bucket=self._store.bucket, Key=self._full, UploadId=self._upload_id
            )
        self._upload_id = None

    def abort(self) -> None:
        self._done = True
        self._buf = bytearray()
        self._abort_upload()
