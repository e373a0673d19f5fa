"""Streaming multipart upload for the S3 backend: bounded memory, parts uploaded in parallel,
server-side part copies for `compose`, and read-back resolution of a lost completion."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from .errors import Conflict, EndpointUnreachable, StorageError, UnknownOutcome
from .objectstore import ObjectInfo, ObjectWriter
from .s3_calls import S3Calls, S3Object, read_back
from .settings import StoreSettings
from .upload_buffers import Block, MemoryBudget, MemoryRoom


def _multipart_etag(part_etags: Sequence[str]) -> str:
    digest = hashlib.md5(
        b"".join(bytes.fromhex(e.strip('"')) for e in part_etags), usedforsecurity=False
    )
    return f'"{digest.hexdigest()}-{len(part_etags)}"'


class S3Writer(ObjectWriter):
    """Multipart upload: at most `fast_upload_active_blocks` parts in flight plus one buffer,
    each a `Block` held in memory within the store's `budget`, else in a temp file
    (storage/upload_buffers.py).

    `put_whole` writes an object that stayed under one part with a single PUT (create-only
    when `if_none_match`)."""

    def __init__(
        self,
        calls: S3Calls,
        obj: S3Object,
        settings: StoreSettings,
        if_none_match: bool,
        put_whole: Callable[[bytes | bytearray], ObjectInfo],
        budget: MemoryBudget,
        room: MemoryRoom | None = None,
    ) -> None:
        self._calls = calls
        self._obj = obj
        self._if_none_match = if_none_match
        self._put_whole = put_whole
        self._part_size = settings.multipart_size
        self._read_back_timeout = settings.read_back_timeout
        self._policy = settings.upload_buffer_policy()
        self._budget = budget
        self._room = room
        self._buf = Block(self._policy, budget, room)
        self._upload_id: str | None = None
        self._parts: list[Future[str]] = []
        self._blocks: list[Block] = []  # the parts' blocks (closed once sent, or on abort)
        self._slots = threading.BoundedSemaphore(settings.fast_upload_active_blocks)
        self._done = False
        self._size = 0

    def _ensure_upload(self) -> str:
        if self._upload_id is None:
            calls, obj = self._calls, self._obj
            resp = calls.call(
                "MPU_CREATE",
                "multipart upload",
                obj.uri,
                lambda: calls.client.create_multipart_upload(Bucket=calls.bucket, Key=obj.s3_key),
            )
            self._upload_id = resp["UploadId"]
        return self._upload_id

    def _submit(
        self, kind: str, op: str, send: Callable[[str, int], str], block: Block | None = None
    ) -> None:
        """Upload the next part on the pool: `send(upload_id, part_number)` returns its etag;
        `block` (the part's bytes) is closed once it is sent or failed."""
        try:
            upload_id = self._ensure_upload()
        except BaseException:
            if block is not None:
                block.close()
            raise
        number = len(self._parts) + 1
        if block is not None:
            self._blocks.append(block)
        self._slots.acquire()

        def run() -> str:
            try:
                return self._calls.call(kind, op, self._obj.uri, lambda: send(upload_id, number))
            finally:
                if block is not None:
                    block.close()
                self._slots.release()

        self._parts.append(self._calls.pool.submit(run))

    def end_part(self) -> None:
        """Upload what is buffered as one part (compose uses this to place part boundaries)."""
        if not self._buf.size:
            return
        # handed over, not copied
        block, self._buf = self._buf, Block(self._policy, self._budget, self._room)
        calls, obj = self._calls, self._obj

        def upload(upload_id: str, number: int) -> str:
            return calls.client.upload_part(
                Bucket=calls.bucket,
                Key=obj.s3_key,
                UploadId=upload_id,
                PartNumber=number,
                Body=block.body(),  # type: ignore[arg-type]  # botocore sends bytearray as is
            )["ETag"]

        self._submit("MPU_PART", "upload part", upload, block)

    def copy_part(self, s3_key: str, start: int, length: int) -> None:
        """Copy bytes [start, start+length) of the object at `s3_key` as the next part."""
        assert not self._buf.size
        self._size += length
        calls, obj = self._calls, self._obj

        def copy(upload_id: str, number: int) -> str:
            return calls.client.upload_part_copy(
                Bucket=calls.bucket,
                Key=obj.s3_key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource={"Bucket": calls.bucket, "Key": s3_key},
                CopySourceRange=f"bytes={start}-{start + length - 1}",
            )["CopyPartResult"]["ETag"]

        self._submit("MPU_COPY", "upload part copy", copy)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._done:
            raise StorageError(f"write to {self._obj.uri} after commit/abort")
        view = memoryview(data).cast("B")
        while view:
            take = min(len(view), self._part_size - self._buf.size)
            self._buf.write(view[:take])
            self._size += take
            view = view[take:]
            if self._buf.size >= self._part_size:
                self.end_part()
        return len(data)

    def commit(self) -> ObjectInfo:
        if self._done:
            raise StorageError(f"commit of {self._obj.uri} after commit/abort")
        self._done = True
        if self._upload_id is None:  # small object: one PUT instead of a multipart upload
            try:
                body = self._buf.body()  # in memory: handed over as it is, not copied
                return self._put_whole(body if isinstance(body, bytearray) else body.read())
            finally:
                self._buf.close()
        try:
            self.end_part()
            etags = [f.result() for f in self._parts]
        except BaseException:
            self._abort_upload()
            raise
        calls, obj = self._calls, self._obj
        parts = [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]
        kwargs: dict[str, Any] = {
            "Bucket": calls.bucket,
            "Key": obj.s3_key,
            "UploadId": self._upload_id,
            "MultipartUpload": {"Parts": parts},
        }
        if self._if_none_match:
            kwargs["IfNoneMatch"] = "*"
        try:
            return calls.call(
                "MPU_COMPLETE",
                "complete multipart upload",
                obj.uri,
                lambda: ObjectInfo(
                    obj.key, self._size, calls.client.complete_multipart_upload(**kwargs)["ETag"]
                ),
                landed=lambda: self._landed(etags),
            )
        except Conflict as exc:
            self._abort_upload()
            raise Conflict(
                f"put-if-absent {obj.uri}: object already exists; another writer won", obj.uri
            ) from exc
        except (UnknownOutcome, EndpointUnreachable):
            raise  # the completion may have landed (or no request reached the endpoint)
        except StorageError:
            self._abort_upload()
            raise

    def _landed(self, etags: Sequence[str]) -> ObjectInfo | None:
        """The object if it is the one these parts make, else None (also when unreadable
        for `read_back_timeout`)."""
        deadline = time.monotonic() + self._read_back_timeout
        try:
            info = read_back(lambda: self._calls.head(self._obj), deadline)
        except StorageError:
            return None
        return info if info.etag == _multipart_etag(etags) else None

    def _abort_upload(self) -> None:
        if self._upload_id is None:
            return
        for f in self._parts:
            f.cancel()
        for f in self._parts:
            with contextlib.suppress(BaseException):
                f.result()
        for block in self._blocks:  # a cancelled part never ran to close its own
            block.close()
        calls, obj, upload_id = self._calls, self._obj, self._upload_id
        # Best effort: a bucket lifecycle rule removes uploads that could not be aborted.
        with contextlib.suppress(StorageError):
            calls.call(
                None,
                "abort multipart upload",
                obj.uri,
                lambda: calls.client.abort_multipart_upload(
                    Bucket=calls.bucket, Key=obj.s3_key, UploadId=upload_id
                ),
            )
        self._upload_id = None

    def abort(self) -> None:
        self._done = True
        self._buf.close()
        self._abort_upload()
