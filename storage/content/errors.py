"""Errors of the content repository. Storage errors are translated once, in `translate`;
each class's kind comes from the kind base it derives from (storage/error_kinds.py)."""

from __future__ import annotations

from ..error_kinds import (
    ConflictError,
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
    AccessDenied,
    Conflict,
    IntegrityError,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
    StorageFull,
    UnknownOutcome,
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
    kind."""
    text = f"{what}: {exc}"
    if isinstance(exc, IntegrityError):
        return ContentIntegrityError(text, exc.uri)
    if isinstance(exc, NotFound | RangeNotSatisfiable):
        return ContentNotFound(text)
    if isinstance(exc, Conflict):
        return ContentConflict(text)
    if isinstance(exc, UnknownOutcome):
        return ContentUnknownOutcome(text)
    # The remaining kinds keep their kind too: the answer to an error is decided by its kind.
    if isinstance(exc, StorageFull):
        return ContentStorageFull(text)
    if isinstance(exc, AccessDenied):
        return ContentAccessDenied(text)
    if isinstance(exc, UnavailableError):
        return ContentUnavailable(text)
    return ContentRepositoryError(text)
