"""Errors of the object-store layer. Backend errors are translated once per backend: local
filesystem errors here (`translate_os`), botocore's next to the S3 backend (`s3_errors.py`).

Every message names the URI it is about and what the user can check, so that the CLI can
print it as a single actionable line. Each class's kind (error_kinds.py) comes from the one
kind base it also derives from.
"""

from __future__ import annotations

import errno
from types import MappingProxyType

from .error_kinds import (
    ConflictError,
    DataIntegrityError,
    FlowledgerBaseError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    StorageFullError,
    UnavailableError,
    UnknownOutcomeError,
)


class StorageError(FlowledgerBaseError):
    """Base class of every error raised by `storage`."""

    def __init__(self, message: str, uri: str = "") -> None:
        super().__init__(message)
        self.uri = uri


class InvalidKey(StorageError, InvalidInputError, ValueError):
    """A key that is not safe to use on every backend."""


class InvalidURI(StorageError, InvalidInputError, ValueError):
    """A repository URI that flowledger cannot open."""


class NotFound(StorageError, NotFoundError):
    """The object does not exist."""


class RangeNotSatisfiable(StorageError, InvalidInputError):
    """A ranged read starts past the end of the object."""


class Conflict(StorageError, ConflictError):
    """A conditional write lost: the object exists (create-only) or changed (compare-and-swap)."""


class UnknownOutcome(StorageError, UnknownOutcomeError):
    """A conditional write may or may not have landed and reading back could not tell."""


class AccessDenied(StorageError, ForbiddenError):
    """Credentials are missing, wrong, or not allowed to do this."""


class BucketMissing(StorageError, NotFoundError):
    """The bucket named in the repository URI does not exist."""


class EndpointUnreachable(StorageError, UnavailableError):
    """The S3 endpoint could not be reached."""


class EndpointTimeout(EndpointUnreachable):
    """The endpoint accepted the connection but did not answer a read within the timeout."""


class UnsafeBackend(StorageError):
    """The endpoint does not honour conditional writes, so atomic commits are impossible."""


class IntegrityError(StorageError, DataIntegrityError):
    """A committed object's bytes do not match its checksum (damaged or truncated).

    `uri` names the object; the message says what was expected and what was read."""


class BackendError(StorageError, UnavailableError):
    """Any other failure reported by the backend (a 5xx, throttling): the store failed this
    request, the same request may work later."""


class StorageFull(StorageError, StorageFullError):
    """The local filesystem holding the repository has no space left (ENOSPC) or the user's
    quota on it is used up (EDQUOT). The message names the folder; the write left nothing."""


_FULL = MappingProxyType(
    {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded"}
)


def translate_os(exc: OSError, uri: str, op: str, folder: str = "") -> StorageError:
    """Map a local filesystem error to a flowledger storage error. `folder`: the repository
    folder the write went to, named when the filesystem under it is full."""
    where = f"{op} {uri}"
    if isinstance(exc, FileNotFoundError):
        return NotFound(f"{where}: object not found", uri)
    if isinstance(exc, PermissionError):
        return AccessDenied(f"{where}: permission denied; check the directory's owner", uri)
    full = _FULL.get(exc.errno) if exc.errno is not None else None
    if full is not None:
        return StorageFull(
            f"{where}: {full} holding {folder or uri}; free space there or move "
            "the repository to a larger disk, then retry (the partial write was removed)",
            uri,
        )
    return BackendError(f"{where}: {exc.strerror or exc}", uri)
