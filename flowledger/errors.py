"""Errors of the application layer and which errors the CLI reports as the user's problem
(one line on stderr, see `flowledger.output.error_line`) rather than as a bug."""

from __future__ import annotations

from provenance import ProvenanceError
from storage import FlowledgerBaseError, StorageError
from storage.content import ContentRepositoryError
from timeline import TimelineError


class FlowledgerError(FlowledgerBaseError):
    """An application-level error with a message the user can act on."""


REPORTED = (
    FlowledgerError,
    StorageError,
    ContentRepositoryError,
    ProvenanceError,
    TimelineError,
    ValueError,
    OSError,
)
