"""The S3 backend's one call site: every boto3 (and obstore) request is counted, sent and its
error translated in `S3Calls.call` (like s3fs's `_call_s3` -> `translate_boto_error`), and a
failed conditional write asks "did my write land?" there, once, with the check passed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from .errors import BackendError, EndpointUnreachable, StorageError
from .objectstore import ObjectInfo, RequestStats
from .s3_errors import (
    OBSTORE_ERRORS,
    is_outcome_unknown,
    is_transport_failure,
    may_have_landed,
    translate_s3,
    unresolved,
)
from .settings import StoreSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")

AWS_ERRORS = (ClientError, BotoCoreError, *OBSTORE_ERRORS)


def _s3_options(path_style: bool, payload_signing: bool | None) -> Any:
    """botocore's S3 options (no `payload_signing_enabled` when None: botocore chooses)."""
    options: dict[str, Any] = {"addressing_style": "path" if path_style else "auto"}
    if payload_signing is not None:
        options["payload_signing_enabled"] = payload_signing
    return options


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
        s3=_s3_options(path_style, settings.payload_signing),
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


#: Whether an attempt of the request this call stack is sending was sent and not answered.
#: botocore sends every attempt (and runs its retry hooks) on the caller's thread, in its
#: context, and the final exception it raises tells only about the last attempt: a write whose
#: first attempt reached the server and whose retry was refused would otherwise read as
#: "never sent".
_SENT_UNANSWERED: ContextVar[bool] = ContextVar("s3_sent_unanswered", default=False)


def note_sent_unanswered() -> None:
    """Record that an attempt of the request being sent, made outside botocore (the obstore
    paths), may have reached the server without an answer."""
    _SENT_UNANSWERED.set(True)


def _note_attempt(caught_exception: BaseException | None = None, **_: Any) -> None:
    if caught_exception is not None and is_outcome_unknown(caught_exception):
        _SENT_UNANSWERED.set(True)


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


def read_back(read: Callable[[], T], deadline: float) -> T:
    """`read()` of a write's object to learn whether the write landed, sent again with backoff
    while the endpoint does not answer (refused, hung, dropped, 5xx: a server restarting)
    until `deadline` (`time.monotonic()`); then its last error. A read changes nothing, so
    sending it again is always safe."""
    delay = 0.2
    while True:
        try:
            return read()
        except (EndpointUnreachable, BackendError):
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


@dataclass(frozen=True)
class S3Object:
    """Where one object lives: its key as the caller names it (relative to the store's
    prefix), its S3 key, and its URI for messages."""

    key: str
    s3_key: str
    uri: str


class S3Calls:
    """The connection a store and its scoped views and writers share: client, bucket,
    request counters and the pool that uploads parts."""

    def __init__(
        self, client: S3Client, bucket: str, stats: RequestStats, pool: ThreadPoolExecutor
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.stats = stats
        self.pool = pool
        self.endpoint: str = client.meta.endpoint_url
        # Once per client (unique_id): a store's scoped views share its client.
        client.meta.events.register_first(
            "needs-retry.s3", _note_attempt, unique_id="flowledger-note-attempt"
        )

    def call(
        self,
        kind: str | None,
        op: str,
        uri: str,
        send: Callable[[], T],
        *,
        landed: Callable[[], T | None] | None = None,
    ) -> T:
        """`send()` (one boto3 request), counted as `kind` in `stats`, its botocore error
        translated into a `StorageError` about `uri` (`op` names what was done).

        `kind` None: not a request of its own (reading a response body) or a best-effort
        cleanup that was never counted. `landed`, for a conditional write: when the failure
        leaves open whether the write was ours (`may_have_landed`), the result of reading
        back, None when the object is not (or not yet) ours.

        A write any attempt of which was sent and not answered never fails as "unreachable"
        (or as any other answer of a later attempt): it is ours by reading back, a conflict,
        or `UnknownOutcome`."""
        if kind is not None:
            self.stats.add(kind)
        _SENT_UNANSWERED.set(False)
        try:
            return send()
        except AWS_ERRORS as exc:
            sent = _SENT_UNANSWERED.get()  # read now: `landed` sends requests of its own
            if landed is not None and may_have_landed(exc, sent):
                try:
                    mine = landed()
                except StorageError as err:
                    # After a transport failure a read that fails too leaves the outcome
                    # unknown (whatever the last attempt answered, a 412 included); after a
                    # plain retried 412 the read's own error is the answer.
                    if not (sent or is_outcome_unknown(exc)):
                        raise
                    raise unresolved(uri, self.endpoint, op) from err
                if mine is not None:
                    return mine
            raise translate_s3(exc, uri, self.endpoint, op, earlier_attempt_sent=sent) from exc

    def head(self, obj: S3Object) -> ObjectInfo:
        resp = self.call(
            "HEAD",
            "head",
            obj.uri,
            lambda: self.client.head_object(Bucket=self.bucket, Key=obj.s3_key),
        )
        return ObjectInfo(obj.key, resp["ContentLength"], resp["ETag"], resp.get("LastModified"))
