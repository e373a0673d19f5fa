"""botocore's and obstore's errors, classified and translated into storage errors: the S3
backend's half of `storage/errors.py`, kept here so that importing `storage` (or `timeline`)
loads no boto3.

`translate_s3` is the only mapping from a botocore (or obstore) exception to a `StorageError`;
the S3 backend reaches it through one call site (`storage/s3_calls.py`). obstore serves the
read path (`storage/s3_reads.py`) and plain PUTs (`storage/s3_puts.py`) and raises only its
definite answers ("no such key", "access denied"); every other failure is sent again through
botocore and classified here.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from obstore.exceptions import NotFoundError as ObstoreNotFound
from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

from .errors import (
    AccessDenied,
    BackendError,
    BucketMissing,
    Conflict,
    EndpointTimeout,
    EndpointUnreachable,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
    UnknownOutcome,
)

#: What the obstore paths raise (the rest they hand back to botocore); obstore raises a
#: missing object as the builtin FileNotFoundError.
OBSTORE_ERRORS = (ObstoreNotFound, FileNotFoundError, PermissionDeniedError, UnauthenticatedError)

_CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound", "NoSuchUpload"})
_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "403",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
    }
)


def _code(exc: ClientError) -> str:
    err: Any = exc.response.get("Error", {})
    return str(err.get("Code", ""))


def _short(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return f"S3 error {_code(exc)}"
    return type(exc).__name__


def retry_attempts(exc: ClientError) -> int:
    """How many times botocore re-sent the request before this answer."""
    meta: Any = exc.response.get("ResponseMetadata", {})
    return int(meta.get("RetryAttempts", 0))


def is_conflict(exc: BaseException) -> bool:
    return isinstance(exc, ClientError) and _code(exc) in _CONFLICT_CODES


#: Operations that change nothing: a transport failure during one is not an unknown outcome.
READ_OPS = frozenset({"get", "head", "list", "capability check", "list multipart uploads"})


def is_transport_failure(exc: BaseException) -> bool:
    """Refused, timed out or dropped connections (not an answer from the server)."""
    return isinstance(exc, EndpointConnectionError | ConnectTimeoutError | HTTPClientError)


def is_outcome_unknown(exc: BaseException) -> bool:
    """True for transport failures after which a sent write may have been applied: the
    connection was open (read timeout, reset, closed before the answer), so the request may
    have reached the server. A refused connection or a connect timeout sent nothing."""
    return isinstance(exc, HTTPClientError | ReadTimeoutError | ConnectionClosedError)


def may_have_landed(exc: BaseException, earlier_attempt_sent: bool = False) -> bool:
    """Whether a failed write may still be ours, so reading back must decide
    (docs/object-store.md, "Conflicts and unknown outcomes"):
    a 412 answering a re-sent request (it can lose to its own first attempt), a transport
    failure after the request was sent, or any failure of a request one of whose earlier
    attempts (botocore retries) was sent and not answered."""
    if earlier_attempt_sent:
        return True
    if is_conflict(exc):
        return isinstance(exc, ClientError) and retry_attempts(exc) > 0
    return is_outcome_unknown(exc)


def unresolved(uri: str, endpoint: str, op: str) -> UnknownOutcome:
    """A write that was sent and not answered, and whose object could not be read back."""
    return UnknownOutcome(
        f"{op} {uri}: the connection to {endpoint} failed after the request was sent and "
        "reading back could not tell whether it landed; the write may or may not have been "
        "applied",
        uri,
    )


def translate_s3(
    exc: BaseException, uri: str, endpoint: str, op: str, *, earlier_attempt_sent: bool = False
) -> StorageError:
    """Map a botocore exception to a flowledger storage error. The only such mapping.

    `earlier_attempt_sent`: an earlier attempt of this request (botocore retries it) was
    sent and never answered. For a write that attempt may have been applied, so whatever the
    last attempt met (a refused connection, a 5xx) the outcome is unknown; only a conflict,
    which the caller resolved by reading back, stays a conflict."""
    where = f"{op} {uri}"
    if earlier_attempt_sent and op not in READ_OPS and not is_conflict(exc):
        return UnknownOutcome(
            f"{where}: an attempt reached {endpoint} but its answer was lost, and the retry "
            f"failed ({_short(exc)}); the write may or may not have been applied",
            uri,
        )
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return AccessDenied(
            f"{where}: no S3 credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            uri,
        )
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return EndpointUnreachable(
            f"{where}: cannot reach S3 endpoint {endpoint}; check AWS_ENDPOINT_URL and that "
            "the server is running",
            uri,
        )
    if is_outcome_unknown(exc) and op in READ_OPS:
        return EndpointTimeout(
            f"{where}: no answer from S3 endpoint {endpoint} within the read timeout "
            "(fs.s3a.connection.timeout) or the connection dropped; check that the server is "
            "healthy",
            uri,
        )
    if is_outcome_unknown(exc):
        return UnknownOutcome(
            f"{where}: connection to {endpoint} failed after the request was sent; the write "
            "may or may not have been applied",
            uri,
        )
    if isinstance(exc, ObstoreNotFound | FileNotFoundError):
        return NotFound(f"{where}: object not found", uri)
    if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
        return AccessDenied(
            f"{where}: access denied by {endpoint}; check AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY and the bucket policy",
            uri,
        )
    if isinstance(exc, ClientError):
        code = _code(exc)
        if code in _CONFLICT_CODES:
            return Conflict(f"{where}: precondition failed ({code}); another writer won", uri)
        if code == "NoSuchBucket":
            return BucketMissing(
                f"{where}: bucket does not exist at {endpoint}; create it or fix the "
                "repository URI",
                uri,
            )
        if code in _NOT_FOUND_CODES:
            return NotFound(f"{where}: object not found", uri)
        if code == "InvalidRange":
            return RangeNotSatisfiable(f"{where}: range starts past the end of the object", uri)
        if code in _DENIED_CODES:
            return AccessDenied(
                f"{where}: access denied by {endpoint} ({code}); check AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY and the bucket policy",
                uri,
            )
        msg = exc.response.get("Error", {}).get("Message", "")
        return BackendError(f"{where}: S3 error {code}: {msg}", uri)
    return BackendError(f"{where}: {type(exc).__name__}: {exc}", uri)
