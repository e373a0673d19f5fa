"""Errors of the application layer and which errors the CLI reports as the user's problem
(one line on stderr, see `flowledger.output.error_line`) rather than as a bug."""

from __future__ import annotations

from storage import FlowledgerBaseError


class FlowledgerError(FlowledgerBaseError):
    """An application-level error with a message the user can act on."""


# Every package's errors (storage, content, timeline, provenance, ours) descend from the one
# root; ValueError and OSError are bad input or a missing/unreadable file.
REPORTED = (FlowledgerBaseError, ValueError, OSError)

#: Exit code of a command whose write may or may not have landed (`UnknownOutcomeError` of any
#: package): distinct from 1 (failed, nothing of it landed) so that a script never retries a
#: write blindly. The message says what to check (docs/faults.md).
EXIT_UNKNOWN_OUTCOME = 3
