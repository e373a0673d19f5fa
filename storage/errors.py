"""Errors of the object-store layer. Backend errors are translated once per backend: local
filesystem errors here (`translate_os`), botocore's next to the S3 backend (`s3_errors.py`).

Every message names the URI it is about and what the user can check, so that the CLI can
print it as a single actionable line.
"""

from __future__ import annotations

import errno
from types import MappingProxyType


class FlowledgerBaseError(Exception):
    """Root of every error a flowledger package raises (each package's base subclasses it)."""


class ConflictError(FlowledgerBaseError):
    """Someone else won: a conditional write, a commit or a lock went to another writer and
    this one changed nothing. Every package's conflict subclasses this (with its own base)."""


class UnknownOutcomeError(FlowledgerBaseError):
    """A write may or may not have landed and reading back could not tell: never the same
    as a conflict. Every package's unknown outcome subclasses this (with its own base)."""


class StorageError(FlowledgerBaseError):
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


class Conflict(StorageError, ConflictError):
    """A conditional write lost: the object exists (create-only) or changed (compare-and-swap)."""


class UnknownOutcome(StorageError, UnknownOutcomeError):
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


class StorageFull(BackendError):
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
