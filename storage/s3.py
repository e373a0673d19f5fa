"""S3 backend (boto3): AWS S3, MinIO, moto's server, any endpoint with conditional writes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from . import capability
from .compose import MIN_PART, plan_compose
from .errors import (
    Conflict,
    NotFound,
    StorageError,
    UnknownOutcome,
    is_conflict,
    is_outcome_unknown,
    is_transport_failure,
    raise_s3,
    retry_attempts,
)
from .keys import validate_prefix
from .objectstore import ByteRange, ListPage, ObjectInfo, ObjectStore, ObjectWriter, RequestStats
from .s3_writer import S3Writer
from .settings import StoreSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_AWS_ERRORS = (ClientError, BotoCoreError)


def make_client(settings: StoreSettings) -> S3Client:
    path_style = settings.path_style_access
    if path_style is None:
        path_style = settings.endpoint_url is not None
    config = Config(
        region_name=settings.region,
        retries={"mode": "standard", "max_attempts": settings.attempts_maximum},
        connect_timeout=settings.connection_establish_timeout,
        read_timeout=settings.connection_timeout,
        max_pool_connections=settings.connection_maximum,
        s3={"addressing_style": "path" if path_style else "auto"},
        # Third-party servers (MinIO, moto) vary in flexible-checksum support; S3 only
        # requires checksums on a few operations, so send them only there.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = boto3.session.Session()
    client = session.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        config=config,
    )
    # Runs before botocore's own retry handler: bounds what it would retry `max_attempts`
    # times with backoff (a closed port took ~15 s, a hung endpoint 5 read timeouts).
    client.meta.events.register_first("needs-retry.s3", _transport_retries(settings.retry_limit))
    return client


def _transport_retries(limit: int) -> Callable[..., Any]:
    def veto(
        attempts: int = 1, caught_exception: BaseException | None = None, **_: Any
    ) -> bool | None:
        if isinstance(caught_exception, ReadTimeoutError):
            return False  # hung: another attempt waits as long again
        if caught_exception is not None and is_transport_failure(caught_exception):
            return False if attempts > limit else None
        return None  # botocore decides (throttling, 5xx)

    return veto


class S3ObjectStore(ObjectStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        settings: StoreSettings | None = None,
        client: S3Client | None = None,
        stats: RequestStats | None = None,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.settings = settings or StoreSettings()
        self.client = client or make_client(self.settings)
        self.stats = stats or RequestStats()
        self.endpoint = self.client.meta.endpoint_url
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self._pool = pool or ThreadPoolExecutor(
            max_workers=self.settings.connection_maximum, thread_name_prefix="flowledger-s3"
        )

    def scoped(self, prefix: str) -> S3ObjectStore:
        validate_prefix(prefix)
        return S3ObjectStore(
            self.bucket,
            self.prefix + prefix.strip("/"),
            self.settings,
            self.client,
            self.stats,
            self._pool,
        )

    def _root_prefix(self) -> str:
        return self.prefix

    def _full(self, key: str) -> str:
        return self.prefix + self._key(key)

    def _fail(self, exc: BaseException, key: str, op: str) -> StorageError:
        try:
            raise_s3(exc, self.url(key), self.endpoint, op)
        except StorageError as err:
            return err

    def capabilities(self) -> capability.Capabilities:
        ttl = self.settings.capability_cache_ttl
        known = capability.cached(self.endpoint, self.bucket, ttl)
        if known is not None:
            return known
        self.stats.add("PROBE")  # ~6 requests, once per bucket per process or per TTL on disk
        return capability.probe(self.client, self.bucket, self.prefix, self.endpoint, ttl)

    def _require_conditional_put(self) -> None:
        capability.require_conditional_put(
            self.capabilities(), self.endpoint, self.bucket, self.settings.allow_unsafe
        )

    # -- writes -----------------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> ObjectInfo:
        full = self._full(key)
        self.stats.add("PUT")
        try:
            resp = self.client.put_object(Bucket=self.bucket, Key=full, Body=data)
        except _AWS_ERRORS as exc:
            raise self._fail(exc, key, "put") from exc
        return ObjectInfo(key, len(data), resp["ETag"])

    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        return self._conditional_put(key, data, {"IfNoneMatch": "*"}, "put-if-absent")

    def put_if_match(self, key: str, data: bytes, etag: str, *, durable: bool = True) -> ObjectInfo:
        return self._conditional_put(key, data, {"IfMatch": etag}, "put-if-match")

    def _conditional_put(self, key: str, data: bytes, cond: dict[str, str], op: str) -> ObjectInfo:
        full = self._full(key)
        self._require_conditional_put()
        self.stats.add("PUT")
        try:
            resp = self.client.put_object(Bucket=self.bucket, Key=full, Body=data, **cond)  # type: ignore[arg-type]
            return ObjectInfo(key, len(data), resp["ETag"])
        except ClientError as exc:
            if "IfMatch" in cond and isinstance(self._fail(exc, key, op), NotFound):
                raise Conflict(
                    f"{op} {self.url(key)}: object does not exist; another writer won",
                    self.url(key),
                ) from exc
            if not is_conflict(exc):
                raise self._fail(exc, key, op) from exc
            # A retried request can lose to its own first attempt: read back (DESIGN §1.6).
            if retry_attempts(exc) > 0:
                mine = self._read_back(key, data)
                if mine is not None:
                    return mine
            raise Conflict(
                f"{op} {self.url(key)}: precondition failed; another writer won", self.url(key)
            ) from exc
        except BotoCoreError as exc:
            if not is_outcome_unknown(exc):
                raise self._fail(exc, key, op) from exc
            try:
                mine = self._read_back(key, data)
            except StorageError:
                mine = None
            if mine is not None:
                return mine
            raise UnknownOutcome(
                f"{op} {self.url(key)}: the connection to {self.endpoint} failed after the "
                "request was sent and reading back could not confirm it; retry the operation "
                "(it is idempotent) once the endpoint is healthy",
                self.url(key),
            ) from exc

    def _read_back(self, key: str, data: bytes) -> ObjectInfo | None:
        """The object if it holds exactly `data` (our write landed), else None."""
        try:
            body, info = self.get_object(key)
        except NotFound:
            return None
        return info if body == data else None

    def open_writer(self, key: str, *, if_none_match: bool = False) -> ObjectWriter:
        self._full(key)
        if if_none_match:
            self._require_conditional_put()
            capability.require_conditional_multipart(
                self.capabilities(), self.endpoint, self.bucket, self.settings.allow_unsafe
            )
        return S3Writer(self, key, if_none_match)

    def compose(
        self, key: str, sources: Sequence[ByteRange], *, if_none_match: bool = False
    ) -> ObjectInfo:
        resolved = [
            src
            if src.length is not None
            else ByteRange(src.key, src.start, self.head(src.key).size - src.start)
            for src in sources
        ]
        writer = cast(S3Writer, self.open_writer(key, if_none_match=if_none_match))
        try:
            for step in plan_compose(resolved):
                if step.copy is not None:
                    writer.copy_part(step.copy)
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
    def _get(self, key: str, start: int, length: int | None) -> Any:
        full = self._full(key)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": full}
        if length == 0:
            return None
        if start or length is not None:
            end = "" if length is None else str(start + length - 1)
            kwargs["Range"] = f"bytes={start}-{end}"
        self.stats.add("GET")
        try:
            return self.client.get_object(**kwargs)
        except _AWS_ERRORS as exc:
            raise self._fail(exc, key, "get") from exc

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        resp = self._get(key, start, length)
        if resp is None:
            return b""
        try:
            return cast(bytes, resp["Body"].read())
        except _AWS_ERRORS as exc:
            raise self._fail(exc, key, "get") from exc

    def get_object(self, key: str) -> tuple[bytes, ObjectInfo]:
        resp = self._get(key, 0, None)
        try:
            body = cast(bytes, resp["Body"].read())
        except _AWS_ERRORS as exc:
            raise self._fail(exc, key, "get") from exc
        return body, ObjectInfo(key, len(body), resp["ETag"], resp.get("LastModified"))

    def open_read(self, key: str, start: int = 0, length: int | None = None) -> BinaryIO:
        resp = self._get(key, start, length)
        if resp is None:
            import io

            return io.BytesIO(b"")
        return cast(BinaryIO, resp["Body"])

    def head(self, key: str) -> ObjectInfo:
        full = self._full(key)
        self.stats.add("HEAD")
        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=full)
        except _AWS_ERRORS as exc:
            raise self._fail(exc, key, "head") from exc
        return ObjectInfo(key, resp["ContentLength"], resp["ETag"], resp.get("LastModified"))

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
        self.stats.add("LIST")
        try:
            resp = self.client.list_objects_v2(**kwargs)
        except _AWS_ERRORS as exc:
            raise self._fail(exc, prefix, "list") from exc
        n = len(self.prefix)
        objects = tuple(
            ObjectInfo(o["Key"][n:], o["Size"], o["ETag"], o.get("LastModified"))
            for o in resp.get("Contents", [])
        )
        more = resp.get("IsTruncated", False) and objects
        return ListPage(objects, objects[-1].key if more else None)

    # -- deletes ----------------------------------------------------------------------------
    def delete(self, key: str) -> None:
        full = self._full(key)
        self.stats.add("DELETE")
        try:
            self.client.delete_object(Bucket=self.bucket, Key=full)
        except _AWS_ERRORS as exc:
            raise self._fail(exc, key, "delete") from exc

    def delete_many(self, keys: Iterable[str]) -> None:
        full = [self._full(k) for k in keys]
        for i in range(0, len(full), 1000):
            batch = full[i : i + 1000]
            self.stats.add("DELETE_BATCH")
            try:
                resp = self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            except _AWS_ERRORS as exc:
                raise self._fail(exc, batch[0][len(self.prefix) :], "delete") from exc
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
            self.stats.add("LIST")
            try:
                resp = self.client.list_multipart_uploads(**kwargs)
            except _AWS_ERRORS as exc:
                raise self._fail(exc, "", "list multipart uploads") from exc
            for u in resp.get("Uploads", []):
                if u["Key"].startswith(self.prefix) and u["Initiated"] <= cutoff:
                    stale.append((u["Key"], u["UploadId"]))
            if not resp.get("IsTruncated"):
                break
            kwargs["KeyMarker"] = resp.get("NextKeyMarker", "")
            kwargs["UploadIdMarker"] = resp.get("NextUploadIdMarker", "")
        for key, upload_id in stale:
            self.stats.add("DELETE")
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            except _AWS_ERRORS as exc:
                err = self._fail(exc, key[len(self.prefix) :], "abort multipart upload")
                if not isinstance(err, NotFound):  # aborted or completed meanwhile
                    raise err from exc
        return len(stale)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
