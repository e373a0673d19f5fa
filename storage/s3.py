"""S3 backend (boto3): AWS S3, MinIO, moto's server, any endpoint with conditional writes.

Every request goes through `S3Calls.call` (`storage/s3_calls.py`): counted, sent, its botocore
error translated once (`storage/s3_errors.py`)."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from . import capability
from .compose import MIN_PART, plan_compose
from .errors import Conflict, EndpointUnreachable, NotFound, StorageError, UnknownOutcome
from .keys import validate_prefix
from .objectstore import ByteRange, ListPage, ObjectInfo, ObjectStore, ObjectWriter, RequestStats
from .s3_calls import S3Calls, S3Object, make_client, note_sent_unanswered, read_back
from .s3_puts import HandedBack, ObjectPuts
from .s3_reads import ObjectReads, make_store
from .s3_writer import S3Writer
from .settings import StoreSettings
from .upload_buffers import MemoryBudget, MemoryRoom

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3ObjectStore", "make_client"]


def obstore_paths(
    settings: StoreSettings, bucket: str
) -> tuple[ObjectReads | None, ObjectPuts | None]:
    """The obstore paths `settings` turn on, sharing one client (none without credentials:
    botocore's request then says what is missing)."""
    if not (settings.fast_reads or settings.fast_puts):
        return None, None
    store = make_store(settings, bucket)
    if store is None:
        return None, None
    reads = ObjectReads(store) if settings.fast_reads else None
    return reads, ObjectPuts(store, settings.multipart_size) if settings.fast_puts else None


class S3ObjectStore(ObjectStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        settings: StoreSettings | None = None,
        client: S3Client | None = None,
        stats: RequestStats | None = None,
        pool: ThreadPoolExecutor | None = None,
        reads: ObjectReads | None = None,
        puts: ObjectPuts | None = None,
        known: capability.Known | None = None,
        upload_budget: MemoryBudget | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.settings = settings or StoreSettings()
        self.client = client or make_client(self.settings)
        #: GETs and HEADs (s3_reads.py) and plain PUTs (s3_puts.py) through obstore;
        #: never around a client passed in.
        if client is None:
            reads, puts = obstore_paths(self.settings, bucket)
        self._reads, self._puts = reads, puts
        self.stats = stats or RequestStats()
        self.endpoint = self.client.meta.endpoint_url
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        #: Whether the endpoint honours conditional writes, once known (capability.py).
        self._known = known or capability.Known()
        #: Bytes of upload parts this store and its scoped views hold in memory
        #: (`StoreSettings.fast_upload_buffer_memory` bounds them; upload_buffers.py).
        self.upload_budget = upload_budget or MemoryBudget()
        self._calls = S3Calls(
            self.client,
            bucket,
            self.stats,
            pool
            or ThreadPoolExecutor(
                max_workers=self.settings.connection_maximum, thread_name_prefix="flowledger-s3"
            ),
        )

    @property
    def identity(self) -> str:
        return f"{self.endpoint} {self.uri}"

    def scoped(self, prefix: str) -> S3ObjectStore:
        validate_prefix(prefix)
        return S3ObjectStore(
            self.bucket,
            self.prefix + prefix.strip("/"),
            self.settings,
            self.client,
            self.stats,
            self._calls.pool,
            self._reads,
            self._puts,
            self._known,
            self.upload_budget,
        )

    def _root_prefix(self) -> str:
        return self.prefix

    def _full(self, key: str) -> str:
        return self.prefix + self._key(key)

    def _object(self, key: str) -> S3Object:
        return S3Object(key, self._full(key), self.url(key))

    def capabilities(self) -> capability.Capabilities:
        ttl = self.settings.capability_cache_ttl
        known = self._known.get(self.endpoint, self.bucket, ttl)
        if known is not None:
            return known
        self.stats.add("PROBE")  # ~6 requests, once per store or per TTL on disk
        return self._known.probe(self.client, self.bucket, self.prefix, self.endpoint, ttl)

    def _require_conditional_put(self) -> None:
        capability.require_conditional_put(
            self.capabilities(), self.endpoint, self.bucket, self.settings.allow_unsafe
        )

    # -- writes -----------------------------------------------------------------------------
    def put(self, key: str, data: bytes | bytearray) -> ObjectInfo:
        obj, puts = self._object(key), self._puts

        def send() -> str:
            if puts is not None and len(data) <= puts.max_bytes:
                got = puts.put(obj.s3_key, data)
                if not isinstance(got, HandedBack):
                    return got
                if got.sent:
                    note_sent_unanswered()  # botocore's failure would not be the whole story
            resp = self.client.put_object(
                Bucket=self.bucket,
                Key=obj.s3_key,
                Body=data,  # type: ignore[arg-type]  # botocore sends bytearray as is
            )
            return str(resp["ETag"])

        return ObjectInfo(key, len(data), self._calls.call("PUT", "put", obj.uri, send))

    def put_if_absent(self, key: str, data: bytes | bytearray) -> ObjectInfo:
        return self._conditional_put(key, data, {"IfNoneMatch": "*"}, "put-if-absent")

    def put_if_match(self, key: str, data: bytes, etag: str, *, durable: bool = True) -> ObjectInfo:
        return self._conditional_put(key, data, {"IfMatch": etag}, "put-if-match")

    def _conditional_put(
        self, key: str, data: bytes | bytearray, cond: dict[str, str], op: str
    ) -> ObjectInfo:
        obj = self._object(key)
        self._require_conditional_put()
        create_only = "IfNoneMatch" in cond
        deadline = 0.0  # of reading back: set when the first failure asks to
        found = ""  # what the last read-back found: "absent", "other" bytes, "" unread

        def landed() -> ObjectInfo | None:
            """Ours if the object holds exactly `data` (bodies are unique per writer)."""
            nonlocal found, deadline
            found = ""
            deadline = deadline or time.monotonic() + self.settings.read_back_timeout
            try:
                body, info = read_back(lambda: self.get_object(key), deadline)
            except NotFound:
                found = "absent"
                return None
            found = "" if body == data else "other"
            return info if body == data else None

        def send() -> ObjectInfo:
            etag = self.client.put_object(
                Bucket=self.bucket,
                Key=obj.s3_key,
                Body=data,  # type: ignore[arg-type]  # bytearray: sent as is
                **cond,  # type: ignore[arg-type]
            )["ETag"]
            return ObjectInfo(key, len(data), etag)

        resent, pause = False, 0.2
        while True:
            try:
                # A retried request can lose to its own first attempt: read back
                # (docs/object-store.md, "Conflicts and unknown outcomes").
                return self._calls.call("PUT", op, obj.uri, send, landed=landed)
            except NotFound as exc:
                if "IfMatch" not in cond:
                    raise
                raise Conflict(
                    f"{op} {obj.uri}: object does not exist; another writer won", obj.uri
                ) from exc
            except Conflict as exc:
                if not create_only and found == "other":
                    # A compare-and-swap that may have landed, and the object holds other
                    # bytes now: ours may have landed and been swapped over since. Calling
                    # that a conflict would let the caller undo what others now build on.
                    raise self._unknown(op, obj.uri) from exc
                if resent:  # a late first attempt may have won against the re-send
                    try:
                        mine = landed()
                    except StorageError as err:
                        raise self._unknown(op, obj.uri) from err
                    if mine is not None:
                        return mine
                raise Conflict(
                    f"{op} {obj.uri}: precondition failed; another writer won", obj.uri
                ) from exc
            except (UnknownOutcome, EndpointUnreachable) as exc:
                if not (resent or isinstance(exc, UnknownOutcome)):
                    raise  # nothing was ever sent
                if create_only and found == "other":
                    # Someone else's object: a create-only write of ours can never land now.
                    raise Conflict(
                        f"{op} {obj.uri}: object exists with other contents; another writer won",
                        obj.uri,
                    ) from exc
                if create_only and found == "absent" and time.monotonic() + pause < deadline:
                    # Not there (yet): sending the create-only PUT again is safe, and settles
                    # it: a first attempt landing late makes this one answer 412, read back.
                    # (A re-send that reached nobody leaves `absent` as it was: try again.)
                    if not isinstance(exc, UnknownOutcome):
                        time.sleep(pause)
                        pause = min(pause * 2, 2.0)
                    resent = True
                    continue
                raise self._unknown(op, obj.uri) from exc

    def _unknown(self, op: str, uri: str) -> UnknownOutcome:
        return UnknownOutcome(
            f"{op} {uri}: the connection to {self.endpoint} failed after the request was sent "
            f"and reading back for {self.settings.read_back_timeout:g} s could not confirm "
            "it; the write may or may not have been applied",
            uri,
        )

    def open_writer(
        self, key: str, *, if_none_match: bool = False, memory: MemoryRoom | None = None
    ) -> ObjectWriter:
        return self._writer(key, if_none_match, memory)

    def _writer(self, key: str, if_none_match: bool, memory: MemoryRoom | None = None) -> S3Writer:
        obj = self._object(key)
        if if_none_match:
            self._require_conditional_put()
            capability.require_conditional_multipart(
                self.capabilities(), self.endpoint, self.bucket, self.settings.allow_unsafe
            )

        def put_whole(data: bytes | bytearray) -> ObjectInfo:
            return self.put_if_absent(key, data) if if_none_match else self.put(key, data)

        return S3Writer(
            self._calls, obj, self.settings, if_none_match, put_whole, self.upload_budget, memory
        )

    def compose(
        self, key: str, sources: Sequence[ByteRange], *, if_none_match: bool = False
    ) -> ObjectInfo:
        resolved = [
            src
            if src.length is not None
            else ByteRange(src.key, src.start, self.head(src.key).size - src.start)
            for src in sources
        ]
        writer = self._writer(key, if_none_match)
        try:
            for step in plan_compose(resolved):
                if step.copy is not None:
                    copy = step.copy
                    assert copy.length is not None
                    writer.copy_part(self._full(copy.key), copy.start, copy.length)
                else:
                    for piece in step.pieces:
                        writer.write(self.get(piece.key, piece.start, piece.length))
                    if sum(p.length or 0 for p in step.pieces) >= MIN_PART:
                        writer.end_part()  # else it is the tail: the last part, or one PUT
        except BaseException:
            writer.abort()
            raise
        return writer.commit()

    # -- reads ------------------------------------------------------------------------------
    def _get(self, key: str, start: int, length: int | None, read: bool) -> tuple[Any, Any]:
        """(response, body) of GetObject for the range: the body read into bytes (`read`) or
        as a stream; (None, b"") for an empty range (no request)."""
        obj = self._object(key)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": obj.s3_key}
        if length == 0:
            return None, b""
        if start or length is not None:
            end = "" if length is None else str(start + length - 1)
            kwargs["Range"] = f"bytes={start}-{end}"

        def send() -> tuple[Any, Any]:
            resp = self.client.get_object(**kwargs)
            return resp, resp["Body"].read() if read else resp["Body"]

        return self._calls.call("GET", "get", obj.uri, send)

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        reads = self._reads
        if reads is not None and length != 0:
            obj = self._object(key)
            data = self._calls.call(
                "GET", "get", obj.uri, lambda: reads.get(obj.s3_key, start, length)
            )
            if data is not None:
                return data
            # Not a definite answer (an error status, a dropped connection): botocore sends
            # it again and retries, classifies and translates what it gets.
        return cast(bytes, self._get(key, start, length, read=True)[1])

    def get_object(self, key: str) -> tuple[bytes, ObjectInfo]:
        resp, body = self._get(key, 0, None, read=True)
        return body, ObjectInfo(key, len(body), resp["ETag"], resp.get("LastModified"))

    def open_read(self, key: str, start: int = 0, length: int | None = None) -> BinaryIO:
        resp, body = self._get(key, start, length, read=False)
        return io.BytesIO(b"") if resp is None else cast(BinaryIO, body)

    def head(self, key: str) -> ObjectInfo:
        obj, reads = self._object(key), self._reads
        if reads is not None:
            found = self._calls.call("HEAD", "head", obj.uri, lambda: reads.head(obj.s3_key))
            if found is not None:
                return ObjectInfo(key, *found)
        return self._calls.head(obj)

    def list_page(
        self, prefix: str = "", start_after: str | None = None, max_keys: int = 1000
    ) -> ListPage:
        validate_prefix(prefix)
        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": max_keys,
        }
        if start_after:
            kwargs["StartAfter"] = self.prefix + start_after
        resp = self._calls.call(
            "LIST", "list", self.url(prefix), lambda: self.client.list_objects_v2(**kwargs)
        )
        n = len(self.prefix)
        objects = tuple(
            ObjectInfo(o["Key"][n:], o["Size"], o["ETag"], o.get("LastModified"))
            for o in resp.get("Contents", [])
        )
        more = resp.get("IsTruncated", False) and objects
        return ListPage(objects, objects[-1].key if more else None)

    # -- deletes ----------------------------------------------------------------------------
    def delete(self, key: str) -> None:
        obj = self._object(key)
        self._calls.call(
            "DELETE",
            "delete",
            obj.uri,
            lambda: self.client.delete_object(Bucket=self.bucket, Key=obj.s3_key),
        )

    def delete_many(self, keys: Iterable[str]) -> None:
        full = [self._full(k) for k in keys]
        for i in range(0, len(full), 1000):
            batch = full[i : i + 1000]
            resp = self._calls.call(
                "DELETE_BATCH",
                "delete",
                self.url(batch[0][len(self.prefix) :]),
                lambda: self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},  # noqa: B023
                ),
            )
            errors = resp.get("Errors", [])
            if errors:
                first = errors[0]
                raise StorageError(
                    f"delete {self.url(first.get('Key', '')[len(self.prefix) :])}: "
                    f"{first.get('Code')}: {first.get('Message')} ({len(errors)} keys failed)",
                    self.uri,
                )

    def abort_stale_uploads(self, older_than: float | None = None) -> int:
        age = self.settings.multipart_purge_age if older_than is None else older_than
        cutoff = datetime.now(UTC) - timedelta(seconds=age)
        stale: list[tuple[str, str]] = []
        # Bucket-wide, filtered here: MinIO answers a Prefix only when it is a whole key.
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        while True:
            resp = self._calls.call(
                "LIST",
                "list multipart uploads",
                self.url(""),
                lambda: self.client.list_multipart_uploads(**kwargs),
            )
            for u in resp.get("Uploads", []):
                if u["Key"].startswith(self.prefix) and u["Initiated"] <= cutoff:
                    stale.append((u["Key"], u["UploadId"]))
            if not resp.get("IsTruncated"):
                break
            kwargs["KeyMarker"] = resp.get("NextKeyMarker", "")
            kwargs["UploadIdMarker"] = resp.get("NextUploadIdMarker", "")
        for key, upload_id in stale:
            with contextlib.suppress(NotFound):  # aborted or completed meanwhile
                self._calls.call(
                    "DELETE",
                    "abort multipart upload",
                    self.url(key[len(self.prefix) :]),
                    lambda: self.client.abort_multipart_upload(
                        Bucket=self.bucket,
                        Key=key,  # noqa: B023
                        UploadId=upload_id,  # noqa: B023
                    ),
                )
        return len(stale)

    def close(self) -> None:
        self._calls.pool.shutdown(wait=False)
