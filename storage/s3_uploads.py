"""Unconditional uploads through obstore (Rust `object_store`): the bodies of data files.

botocore spends Python CPU under the GIL on every request and on every byte it sends (signing,
hashing, chunked socket writes); obstore signs and sends in Rust with the GIL released, so the
threads that encode Parquet keep the interpreter. On a load into MinIO this spared 13 % of the
writing process's CPU at the same request count.

Only writes that need no condition go this way: a plain PUT of a whole object and a streaming
multipart upload that is not create-only (data files are written under keys unique to their
instant). Create-only and compare-and-swap writes, server-side part copies (`compose`) and
every conditional completion stay on boto3 (`storage/s3.py`, `storage/s3_writer.py`), whose
retries tell a write that was sent and unanswered from one that never left
(docs/object-store.md, "Conflicts and unknown outcomes").

A streaming upload hands its parts, as they fill, to one `obstore.put` running on a thread of
its own: obstore creates the multipart upload on the first part, keeps at most
`fast_upload_active_blocks` parts in flight, completes it after the last and aborts it when
the stream fails or is abandoned (nothing is left but what a bucket lifecycle rule removes if
the abort itself cannot be sent). Errors reach the caller through the store's one call site
(`S3Calls.call`), translated in `storage/s3_errors.py`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import obstore

from .errors import StorageError
from .objectstore import ObjectInfo, ObjectWriter
from .s3_calls import S3Calls, S3Object
from .settings import StoreSettings
from .upload_buffers import Block, MemoryBudget

if TYPE_CHECKING:
    from obstore.store import S3Store

_END = object()  # the last part was handed over


class ObjectUploads:
    """obstore's client for one bucket's unconditional uploads (shared by a store's views)."""

    def __init__(self, store: S3Store, settings: StoreSettings) -> None:
        self.store = store
        self.part_size = settings.multipart_size
        self.in_flight = settings.fast_upload_active_blocks

    def put(self, s3_key: str, data: bytes | bytearray | memoryview) -> str:
        """One PUT of the whole body; its ETag."""
        return str(obstore.put(self.store, s3_key, data, use_multipart=False)["e_tag"])

    def stream(self, s3_key: str, feed: PartFeed) -> str:
        """A multipart upload of the parts `feed` yields; the object's ETag."""
        result = obstore.put(
            self.store, s3_key, feed, chunk_size=self.part_size, max_concurrency=self.in_flight
        )
        return str(result["e_tag"])


class PartFeed:
    """The parts of one upload as the iterator obstore pulls them from: one part waits here
    at a time; a part's block gives its memory back to the budget once obstore takes the
    part after it (obstore holds what it has in flight)."""

    def __init__(self) -> None:
        self._parts: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._taken: Block | None = None

    def __iter__(self) -> PartFeed:
        return self

    def __next__(self) -> bytes | bytearray:
        item = self._parts.get()
        if self._taken is not None:
            self._taken.close()
            self._taken = None
        if item is _END:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item  # obstore aborts the upload
        block: Block = item
        self._taken = block
        body = block.body()
        return body if isinstance(body, bytearray) else body.read()

    def hand(self, item: Any, done: Callable[[], bool]) -> bool:
        """Wait until `item` is queued; False when the upload ended first (`done`)."""
        while True:
            try:
                self._parts.put(item, timeout=0.1)
                return True
            except queue.Full:
                if done():
                    return False

    def close(self) -> None:
        """Give back what obstore no longer pulls (after the upload ended)."""
        while not self._parts.empty():
            item = self._parts.get_nowait()
            if isinstance(item, Block):
                item.close()
        if self._taken is not None:
            self._taken.close()
            self._taken = None


class ObstoreWriter(ObjectWriter):
    """A streaming upload of an object no condition guards: parts of `multipart_size`
    buffered as `S3Writer` buffers them (storage/upload_buffers.py) and sent by obstore; an
    object under one part is one PUT."""

    def __init__(
        self,
        calls: S3Calls,
        uploads: ObjectUploads,
        obj: S3Object,
        settings: StoreSettings,
        budget: MemoryBudget,
    ) -> None:
        self._calls, self._uploads, self._obj = calls, uploads, obj
        self._part_size = settings.multipart_size
        self._policy = settings.upload_buffer_policy()
        self._budget = budget
        self._buf = Block(self._policy, budget)
        self._feed: PartFeed | None = None
        self._result: Future[str] = Future()
        self._done = False
        self._size = 0

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
                self._send_part()
        return len(data)

    def _start(self) -> PartFeed:
        """The upload's thread: obstore pulls the parts from the feed until its end."""
        feed, result, s3_key = PartFeed(), self._result, self._obj.s3_key
        self._calls.stats.add("MPU_CREATE")

        def run() -> None:
            try:
                result.set_result(self._uploads.stream(s3_key, feed))
            except BaseException as exc:  # handed to the writer's thread
                result.set_exception(exc)
            finally:
                feed.close()

        threading.Thread(target=run, name="flowledger-s3-upload", daemon=True).start()
        return feed

    def _send_part(self) -> None:
        block, self._buf = self._buf, Block(self._policy, self._budget)
        if self._feed is None:
            self._feed = self._start()
        self._calls.stats.add("MPU_PART")
        if not self._feed.hand(block, self._result.done):
            block.close()
            self._finish()  # the upload failed: its error, translated

    def _finish(self) -> str:
        """The upload's ETag once obstore is done; its error translated."""
        return self._calls.call(None, "multipart upload", self._obj.uri, self._result.result)

    def commit(self) -> ObjectInfo:
        if self._done:
            raise StorageError(f"commit of {self._obj.uri} after commit/abort")
        self._done = True
        obj = self._obj
        if self._feed is None:  # small object: one PUT
            try:
                body = self._buf.body()
                data = body if isinstance(body, bytearray) else body.read()
                etag = self._calls.call(
                    "PUT", "put", obj.uri, lambda: self._uploads.put(obj.s3_key, data)
                )
                return ObjectInfo(obj.key, self._size, etag)
            finally:
                self._buf.close()
        try:
            if self._buf.size:
                self._send_part()
            else:
                self._buf.close()
            self._calls.stats.add("MPU_COMPLETE")
            self._feed.hand(_END, self._result.done)
            return ObjectInfo(obj.key, self._size, self._finish())
        except BaseException:
            self._abort_upload()
            raise

    def _abort_upload(self) -> None:
        feed = self._feed
        if feed is None:
            return
        feed.hand(StorageError(f"upload of {self._obj.uri} abandoned"), self._result.done)
        try:
            self._result.exception()  # wait for obstore's abort
        finally:
            feed.close()

    def abort(self) -> None:
        if self._done:  # committed, or failed committing (and aborted then)
            return
        self._done = True
        self._buf.close()
        self._abort_upload()
