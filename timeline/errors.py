"""Errors of the timeline. A storage conflict or unknown outcome met while completing an
instant is raised as `CommitConflict` / `CommitUnknownOutcome` (commit.py, store.py). Each
class's kind comes from the kind base it derives from (storage/error_kinds.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from storage import (
    ConflictError,
    FlowledgerBaseError,
    IntegrityError,
    InvalidInputError,
    NotFound,
    NotFoundError,
    RefusedError,
    UnknownOutcomeError,
)


class TimelineError(FlowledgerBaseError):
    """Base class of every error raised by `timeline`."""


class InvalidInstant(TimelineError, InvalidInputError, ValueError):
    """A malformed instant time or timeline object name."""


class InstantNotFound(TimelineError, NotFoundError):
    """No instant with that time (in the state asked for) is on the active timeline."""


class CommitConflict(TimelineError, ConflictError):
    """Another instant completed first with a conflicting change; this one did not complete.

    `winner` is the instant time of the instant that won (for a write fenced off by a rollback,
    the rollback's instant time)."""

    def __init__(self, message: str, winner: str = "", winner_action: str = "") -> None:
        super().__init__(message)
        self.winner = winner
        self.winner_action = winner_action


class CommitUnknownOutcome(TimelineError, UnknownOutcomeError):
    """The completing write may or may not have landed and reading back could not tell."""

    def __init__(self, message: str, instant_time: str = "") -> None:
        super().__init__(message)
        self.instant_time = instant_time


class PlanError(TimelineError, RefusedError):
    """A table service (clean, rollback, savepoint, restore, clustering) cannot be planned."""


class WriterNotSupported(TimelineError, RefusedError):
    """A writer cannot build a new file slice of this table from each file group's merged
    state (base file and logs), so it refuses the table instead of writing slices that would
    drop what the logs hold; the message names the table type and what writes it instead.
    Nothing was written."""


class SchemaMismatch(TimelineError, InvalidInputError, ValueError):
    """Data written to a table does not fit its schema (see timeline/schema.py); nothing was
    committed. `columns` names the offending columns."""

    def __init__(self, message: str, columns: list[str] | None = None) -> None:
        super().__init__(message)
        self.columns = list(columns or [])


class DuplicateKeys(TimelineError, InvalidInputError, ValueError):
    """An `insert` into a keyed table met keys the table already holds (nothing was
    committed); `keys` names some of them. Upsert them, or insert with on_duplicate='drop'."""

    def __init__(self, message: str, keys: list[str] | None = None) -> None:
        super().__init__(message)
        self.keys = list(keys or [])


class RangeNotReadable(TimelineError, NotFoundError):
    """An incremental or CDC read reaches instants that were archived or file slices that
    were cleaned. `earliest` is the earliest instant a read may begin at (exclusive)."""

    def __init__(self, message: str, earliest: str = "") -> None:
        super().__init__(message)
        self.earliest = earliest


class InvalidDataFile(TimelineError, InvalidInputError, ValueError):
    """A file given to be written is not what its name says (e.g. a `.parquet` file that is
    not Parquet); the message names the file."""


class CorruptTimelineObject(TimelineError, IntegrityError):
    """A timeline object (or the schema in its commit metadata) passed its checksum but cannot
    be decoded. Also a `storage.IntegrityError`; the message names the object."""


class MissingTableObject(TimelineError, IntegrityError):
    """An object the table's committed timeline says exists is gone (its keyed properties, a
    data or log file a commit names): a read would answer from less than the table holds, so
    it is refused, naming the object (`uri`). Also a `storage.IntegrityError`."""


@contextmanager
def committed_object(where: str) -> Iterator[None]:
    """Reading an object a completed commit names (`where`: its URL): its absence is not a
    "not found" (the table says it exists) but lost data, `MissingTableObject` naming it."""
    try:
        yield
    except (NotFound, FileNotFoundError):
        raise MissingTableObject(
            f"{where} is missing, although a completed commit names it; "
            "`flowledger table check` lists what else is gone",
            where,
        ) from None


class PartitionNamingError(TimelineError, InvalidInputError, ValueError):
    """A table's partition naming this version does not know (written by a newer one)."""


class InvalidPredicate(TimelineError, InvalidInputError, ValueError):
    """A SQL predicate (a filter delete's `where`) that is not one boolean expression over
    the table's columns, or that fails to bind or evaluate; nothing was written."""
