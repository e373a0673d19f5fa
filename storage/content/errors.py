"""Errors of the content repository. Storage errors are translated once, in `translate`."""

from __future__ import annotations

from ..errors import (
    Conflict,
    ConflictError,
    FlowledgerBaseError,
    IntegrityError,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
    UnknownOutcome,
    UnknownOutcomeError,
)


class ContentRepositoryError(FlowledgerBaseError):
    """Base class of every error raised by `storage.content`."""


class ContentNotFound(ContentRepositoryError):
    """The content is gone (destroyed, never written) or the claim points past the end."""


class ContentIntegrityError(ContentRepositoryError, IntegrityError):
    """The bytes read do not match the claim's length or checksum (corrupt or truncated), or
    a ledger document fails its checksum. Also a `storage.IntegrityError`."""


class ContentConflict(ContentRepositoryError, ConflictError):
    """A conditional write of the repository lost to another writer."""


class ContentUnknownOutcome(ContentRepositoryError, UnknownOutcomeError):
    """A write may or may not have landed; the commit it belongs to is uncertain."""


class ContainerFull(ContentRepositoryError):
    """Every container stayed over its backpressure limit for longer than allowed."""


class ClaimNotWritable(ContentRepositoryError):
    """A write to a content claim that is already written, or whose resource claim is sealed."""


class InvalidClaim(ContentRepositoryError, ValueError):
    """A content claim that cannot name any content (e.g. a negative offset): refused before
    any read, with the field named."""


def translate(exc: StorageError, what: str) -> ContentRepositoryError:
    """Map a storage error met while doing `what` to a content-repository error."""
    text = f"{what}: {exc}"
    if isinstance(exc, IntegrityError):
        return ContentIntegrityError(text, exc.uri)
    if isinstance(exc, NotFound | RangeNotSatisfiable):
        return ContentNotFound(text)
    if isinstance(exc, Conflict):
        return ContentConflict(text)
    if isinstance(exc, UnknownOutcome):
        return ContentUnknownOutcome(text)
    return ContentRepositoryError(text)
