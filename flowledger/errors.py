"""Errors of the application layer, and the one table that decides how the CLI and the HTTP
service answer an error: by its kind (storage/error_kinds.py), never by its class or the layer
that raised it. docs/architecture.md ("Errors") explains each choice."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from storage import ErrorKind, FlowledgerBaseError, InvalidInputError, NotFoundError, kind_of


class FlowledgerError(FlowledgerBaseError):
    """An application-level error with a message the user can act on."""


class MissingArgument(FlowledgerError, InvalidInputError):
    """A command was not told what to work on (no table given, by option or environment)."""


class NoSuchTable(FlowledgerError, NotFoundError):
    """The table named was never written (a typo in its URI): nothing is shown or created."""


class LogsNotCompacted(FlowledgerError):
    """A merge-on-read snapshot was asked for as plain files while changes to it are still in
    log files that only a merging reader sees: compact first, or read the base files only."""


@dataclass(frozen=True)
class Answer:
    """How an error of one kind is answered: `http_status` by the service, `exit_code` by
    the CLI."""

    http_status: int
    exit_code: int


#: The single place that maps a kind to its answers. Exit codes: 0 success, 1 failed with
#: nothing changed (as every CLI), 2 bad input (as click's usage errors), 3 unknown outcome;
#: the rest tell a script what to do next without parsing the message.
ANSWERS: MappingProxyType[ErrorKind, Answer] = MappingProxyType(
    {
        ErrorKind.REFUSED: Answer(409, 1),
        ErrorKind.INVALID_INPUT: Answer(400, 2),
        ErrorKind.UNKNOWN_OUTCOME: Answer(504, 3),
        ErrorKind.NOT_FOUND: Answer(404, 4),
        ErrorKind.CONFLICT: Answer(409, 5),
        ErrorKind.INTEGRITY: Answer(500, 6),
        ErrorKind.UNAVAILABLE: Answer(503, 7),
        ErrorKind.FORBIDDEN: Answer(403, 8),
        ErrorKind.OVER_LIMIT: Answer(413, 9),
        ErrorKind.STORAGE_FULL: Answer(507, 10),
    }
)

#: An error no package raised on purpose: a bug (EX_SOFTWARE for the CLI).
INTERNAL = Answer(500, 70)

#: Exit code of a command whose write may or may not have landed (`UnknownOutcomeError` of any
#: package): distinct from 1 (failed, nothing of it landed) so that a script never retries a
#: write blindly. The message says what to check (docs/faults.md).
EXIT_UNKNOWN_OUTCOME = ANSWERS[ErrorKind.UNKNOWN_OUTCOME].exit_code

# Every package's errors descend from the one root; ValueError and OSError are bad input or a
# missing/unreadable file (their kinds: `storage.kind_of`).
REPORTED = (FlowledgerBaseError, ValueError, OSError)


def answer_for(exc: BaseException) -> Answer:
    """The answer to `exc`, by its kind; `INTERNAL` for an error of no kind (a bug)."""
    kind = kind_of(exc)
    return INTERNAL if kind is None else ANSWERS[kind]
