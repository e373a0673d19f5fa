"""Errors of the content repository. Storage errors are translated once, in `translate`;
each class's kind comes from the kind base it derives from (storage/error_kinds.py)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..error_kinds import (
    ConflictError,
    ErrorKind,
    FlowledgerBaseError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    RefusedError,
    StorageFullError,
    UnavailableError,
    UnknownOutcomeError,
)
from ..errors import (
    IntegrityError,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
)


class ContentRepositoryError(FlowledgerBaseError):
    """Base class of every error raised by `storage.content`."""


class ContentNotFound(ContentRepositoryError, NotFoundError):
    """The content is gone (destroyed, never written) or the claim points past the end."""


class ContentIntegrityError(ContentRepositoryError, IntegrityError):
    """The bytes read do not match the claim's length or checksum (corrupt or truncated), or
    a ledger document fails its checksum. Also a `storage.IntegrityError`."""


class ContentConflict(ContentRepositoryError, ConflictError):
    """A conditional write of the repository lost to another writer."""


class ContentUnknownOutcome(ContentRepositoryError, UnknownOutcomeError):
    """A write may or may not have landed; the commit it belongs to is uncertain."""


class ContainerFull(ContentRepositoryError, StorageFullError):
    """Every container stayed over its backpressure limit for longer than allowed."""


class ContentStorageFull(ContentRepositoryError, StorageFullError):
    """The store under a container has no room left (a full disk, a quota)."""


class ContentStoreMissing(ContentRepositoryError, NotFoundError):
    """The bucket or folder under a container does not exist (not the content: the place)."""


class ContentAccessDenied(ContentRepositoryError, ForbiddenError):
    """The object store refused the credentials for a container."""


class ContentUnavailable(ContentRepositoryError, UnavailableError):
    """The object store under a container could not answer (unreachable, timed out, failed)."""


class ClaimNotWritable(ContentRepositoryError, RefusedError):
    """A write to a content claim that is already written, or whose resource claim is sealed."""


class InvalidClaim(ContentRepositoryError, InvalidInputError, ValueError):
    """A content claim that cannot name any content (e.g. a negative offset): refused before
    any read, with the field named."""


def translate(exc: StorageError, what: str) -> ContentRepositoryError:
    """Map a storage error met while doing `what` to a content-repository error of the same
    kind (the kind decides how the CLI and the service answer it)."""
    text = f"{what}: {exc}"
    if isinstance(exc, IntegrityError):
        return ContentIntegrityError(text, exc.uri)
    if isinstance(exc, NotFound | RangeNotSatisfiable):
        return ContentNotFound(text)
    kinded = _BY_KIND.get(exc.kind)
    return ContentRepositoryError(text) if kinded is None else kinded(text)


# The content repository's error for each other kind a storage error can have.
_BY_KIND: Mapping[ErrorKind, type[ContentRepositoryError]] = MappingProxyType(
    {
        ErrorKind.CONFLICT: ContentConflict,
        ErrorKind.UNKNOWN_OUTCOME: ContentUnknownOutcome,
        ErrorKind.NOT_FOUND: ContentStoreMissing,
        ErrorKind.INVALID_INPUT: InvalidClaim,
        ErrorKind.STORAGE_FULL: ContentStorageFull,
        ErrorKind.FORBIDDEN: ContentAccessDenied,
        ErrorKind.UNAVAILABLE: ContentUnavailable,
    }
)
