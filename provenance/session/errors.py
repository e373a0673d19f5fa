"""Errors of process sessions (all are `ProvenanceError`s)."""

from __future__ import annotations

from storage import InvalidInputError

from ..errors import ProvenanceError, ProvenanceUnknownOutcome


class SessionError(ProvenanceError):
    """Base class of session errors."""


class FlowFileHandlingError(SessionError, InvalidInputError, ValueError):
    """A FlowFile was used wrongly (stale version, already removed, never transferred,
    session already committed); NiFi's `FlowFileHandlingException`."""


class SessionCommitError(SessionError):
    """The commit failed before anything became durable; the session was rolled back."""


class SessionUnknownOutcome(SessionError, ProvenanceUnknownOutcome):
    """Content and claimant counts are durable, but the provenance journal write failed or
    timed out: the journal is retried at the next flush, so the events may still land."""
