"""Errors of the provenance repository. Storage errors are translated here, once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from storage import (
    Conflict,
    ConflictError,
    FlowledgerBaseError,
    UnknownOutcome,
    UnknownOutcomeError,
)

T = TypeVar("T")


class ProvenanceError(FlowledgerBaseError):
    """Base class of every error raised by `provenance`."""


class InvalidEvent(ProvenanceError, ValueError):
    """An event NiFi would refuse; the message names the missing field."""


class EventNotFound(ProvenanceError, LookupError):
    """No event with that id (never written, or expired)."""


class ProvenanceConflict(ProvenanceError, ConflictError):
    """Another writer won a conditional write (id allocator, rollover commit)."""


class ProvenanceUnknownOutcome(ProvenanceError, UnknownOutcomeError):
    """A conditional write may or may not have landed; re-open the repository to recover."""


class LineageError(ProvenanceError):
    """Lineage cannot be computed (too many FlowFiles, two creators, not expandable)."""


class ReplayError(ProvenanceError):
    """An event cannot be replayed; the message says why (NiFi's reasons)."""


class ReadOnlyQuery(ProvenanceError, ValueError):
    """`provenance sql` accepts only read statements."""


class SQLError(ProvenanceError, ValueError):
    """A SQL query over the view failed (syntax, unknown column, ...)."""


class IngestError(ProvenanceError, ValueError):
    """A line of an ingest file could not be read as a provenance event."""


def translated(op: str, fn: Callable[[], T]) -> T:
    """Run a storage call, mapping its conflict/unknown-outcome errors to ours."""
    try:
        return fn()
    except Conflict as exc:
        raise ProvenanceConflict(f"{op}: {exc}") from exc
    except UnknownOutcome as exc:
        raise ProvenanceUnknownOutcome(f"{op}: {exc}") from exc
