"""Errors of the application layer and how the CLI reports any flowledger error."""

from __future__ import annotations

from provenance import ProvenanceError
from storage import StorageError
from storage.content import ContentRepositoryError
from timeline import TimelineError


class FlowledgerError(Exception):
    """An application-level error with a message the user can act on."""


def one_line(exc: BaseException) -> str:
    """A single-line message for stderr."""
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


REPORTED = (
    FlowledgerError,
    StorageError,
    ContentRepositoryError,
    ProvenanceError,
    TimelineError,
    ValueError,
    OSError,
)
