"""Errors of the application layer and which errors the CLI reports as the user's problem
(one line on stderr, see `flowledger.output.error_line`) rather than as a bug."""

from __future__ import annotations

from storage import FlowledgerBaseError


class FlowledgerError(FlowledgerBaseError):
    """An application-level error with a message the user can act on."""


# Every package's errors (storage, content, timeline, provenance, ours) descend from the one
# root; ValueError and OSError are bad input or a missing/unreadable file.
REPORTED = (FlowledgerBaseError, ValueError, OSError)
