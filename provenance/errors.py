"""Errors of the provenance repository. Storage errors pass through as `storage` errors
except the conflicts and unknown outcomes of its own conditional writes (id allocator,
journals, staged ingests), raised as `ProvenanceConflict` / `ProvenanceUnknownOutcome` there.
Each class's kind comes from the kind base it derives from (storage/error_kinds.py)."""

from __future__ import annotations

from storage import (
    ConflictError,
    FlowledgerBaseError,
    ForbiddenError,
    IntegrityError,
    InvalidInputError,
    NotFoundError,
    RefusedError,
    UnknownOutcomeError,
)


class ProvenanceError(FlowledgerBaseError):
    """Base class of every error raised by `provenance`."""


class InvalidEvent(ProvenanceError, InvalidInputError, ValueError):
    """An event NiFi would refuse; the message names the missing field."""


class EventNotFound(ProvenanceError, NotFoundError, LookupError):
    """No event with that id (never written, or expired)."""


class ProvenanceConflict(ProvenanceError, ConflictError):
    """Another writer won a conditional write (id allocator, rollover commit)."""


class ProvenanceUnknownOutcome(ProvenanceError, UnknownOutcomeError):
    """A conditional write may or may not have landed; re-open the repository to recover."""


class LineageError(ProvenanceError):
    """Lineage cannot be computed (too many FlowFiles, two creators, not expandable): the
    root's kind, refused."""


class FlowFileNotFound(LineageError, NotFoundError):
    """No provenance event names that FlowFile (never seen, or expired): no lineage."""


class ReplayError(ProvenanceError, RefusedError):
    """An event cannot be replayed; the message says why (NiFi's reasons)."""


class ReadOnlyQuery(ProvenanceError, ForbiddenError, ValueError):
    """`provenance sql` accepts only read statements."""


class SQLError(ProvenanceError, InvalidInputError, ValueError):
    """A SQL query over the view failed (syntax, unknown column, ...)."""


class IngestError(ProvenanceError, InvalidInputError, ValueError):
    """A line of an ingest file could not be read as a provenance event."""


class MissingEvents(ProvenanceError, IntegrityError):
    """Committed event ids whose object (journal or staged-ingest manifest) is gone: a hole
    in the id sequence that no open allocation explains. Also a `storage.IntegrityError`;
    `ranges` are the missing ids [first, end), the message names where they should be."""

    def __init__(self, message: str, uri: str, ranges: tuple[tuple[int, int], ...]) -> None:
        super().__init__(message, uri)
        self.ranges = ranges
