"""Errors of the object-store layer, and the one place where backend errors are translated.

Every message names the URI it is about and what the user can check, so that the CLI can
print it as a single actionable line.
"""

from __future__ import annotations

import errno
from typing import Any, NoReturn

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)


class StorageError(Exception):
    """Base class of every error raised by `storage`."""

    def __init__(self, message: str, uri: str = "") -> None:
        super().__init__(message)
        self.uri = uri


class InvalidKey(StorageError, ValueError):
    """A key that is not safe to use on every backend."""


class InvalidURI(StorageError, ValueError):
    """A repository URI that flowledger cannot open."""


class NotFound(StorageError):
    """The object does not exist."""


class RangeNotSatisfiable(StorageError):
    """A ranged read starts past the end of the object."""


class Conflict(StorageError):
    """A conditional write lost: the object exists (create-only) or changed (compare-and-swap)."""


class UnknownOutcome(StorageError):
    """A conditional write may or may not have landed and reading back could not tell."""


class AccessDenied(StorageError):
    """Credentials are missing, wrong, or not allowed to do this."""


class BucketMissing(StorageError):
    """The bucket named in the repository URI does not exist."""


class EndpointUnreachable(StorageError):
    """The S3 endpoint could not be reached."""


class EndpointTimeout(EndpointUnreachable):
    """The endpoint accepted the connection but did not answer a read within the timeout."""


class UnsafeBackend(StorageError):
    """The endpoint does not honour conditional writes, so atomic commits are impossible."""


class IntegrityError(StorageError):
    """A committed object's bytes do not match its checksum (damaged or truncated).

    `uri` names the object; the message says what was expected and what was read."""


class BackendError(StorageError):
    """Any other failure reported by the backend."""


_CONFLICT_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict"}
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound", "NoSuchUpload"}
_DENIED_CODES = {
    "AccessDenied",
    "403",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
}


def _code(exc: ClientError) -> str:
    err: Any = exc.response.get("Error", {})
    return str(err.get("Code", ""))


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
    return isinstance(
        exc,
        EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError,
    )


def is_outcome_unknown(exc: BaseException) -> bool:
    """True for transport failures after which a sent write may have been applied."""
    return isinstance(exc, ReadTimeoutError | ConnectionClosedError)


def translate_s3(exc: BaseException, uri: str, endpoint: str, op: str) -> StorageError:
    """Map a botocore exception to a flowledger storage error. The only such mapping."""
    where = f"{op} {uri}"
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


def translate_os(exc: OSError, uri: str, op: str) -> StorageError:
    """Map a local filesystem error to a flowledger storage error."""
    where = f"{op} {uri}"
    if isinstance(exc, FileNotFoundError):
        return NotFound(f"{where}: object not found", uri)
    if isinstance(exc, PermissionError):
        return AccessDenied(f"{where}: permission denied; check the directory's owner", uri)
    if exc.errno == errno.ENOSPC:
        return BackendError(f"{where}: no space left on device", uri)
    return BackendError(f"{where}: {exc.strerror or exc}", uri)


def raise_s3(exc: BaseException, uri: str, endpoint: str, op: str) -> NoReturn:
    raise translate_s3(exc, uri, endpoint, op) from exc
