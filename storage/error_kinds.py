"""The kinds of error every flowledger package raises, and the root they all descend from.

An error's *kind* says what the caller can do about it (fix the input, retry after re-reading,
check whether a write landed, wait, call an operator); the application answers by kind alone:
one HTTP status and one CLI exit code per kind (the table in `flowledger.errors`, documented in
docs/architecture.md, "Errors"). Each package keeps its own error classes under its own root
(so `except StorageError` still catches only storage) and gives each class its kind by also
deriving from one *kind base* below. A class that derives from no kind base has the root's
kind, `REFUSED`: it failed for the reason its message gives and changed nothing.

The kind lives here, at the bottom of the layering, so that storage, timeline and provenance
declare kinds without knowing how the application answers them.
"""

from __future__ import annotations

import errno
from enum import StrEnum
from typing import ClassVar


class ErrorKind(StrEnum):
    """What happened, as far as the caller is concerned."""

    INVALID_INPUT = "invalid_input"  # the request cannot work as given: fix it
    FORBIDDEN = "forbidden"  # not allowed: credentials refused, or not through this interface
    NOT_FOUND = "not_found"  # the thing named does not exist (never written, or gone)
    CONFLICT = "conflict"  # someone else won; nothing of this landed: re-read, then retry
    REFUSED = "refused"  # the repository's state does not allow it; nothing changed
    OVER_LIMIT = "over_limit"  # over a limit the operator set (answer size, query time)
    UNKNOWN_OUTCOME = "unknown_outcome"  # a write may or may not have landed: check first
    INTEGRITY = "integrity"  # committed data fails its checksum or is missing: damaged
    UNAVAILABLE = "unavailable"  # the store or the service cannot answer now: retry later
    STORAGE_FULL = "storage_full"  # no room to write: free space or raise the limit


class FlowledgerBaseError(Exception):
    """Root of every error a flowledger package raises (each package's base subclasses it).

    `kind` is inherited: from the one kind base a class derives from, else `REFUSED`."""

    kind: ClassVar[ErrorKind] = ErrorKind.REFUSED


class InvalidInputError(FlowledgerBaseError):
    """Kind base: the input cannot work as given (a malformed name, event, query, file)."""

    kind = ErrorKind.INVALID_INPUT


class ForbiddenError(FlowledgerBaseError):
    """Kind base: not allowed (the store refused the credentials, or a statement or path
    that this interface does not permit)."""

    kind = ErrorKind.FORBIDDEN


class NotFoundError(FlowledgerBaseError):
    """Kind base: what was named does not exist (never written, expired, archived away)."""

    kind = ErrorKind.NOT_FOUND


class ConflictError(FlowledgerBaseError):
    """Someone else won: a conditional write, a commit or a lock went to another writer and
    this one changed nothing. Every package's conflict subclasses this (with its own base)."""

    kind = ErrorKind.CONFLICT


class RefusedError(FlowledgerBaseError):
    """Kind base, stated explicitly: the repository's current state does not allow this
    (nothing to plan, content gone for a replay, a lineage too large); nothing changed."""

    kind = ErrorKind.REFUSED


class OverLimitError(FlowledgerBaseError):
    """Kind base: the request asks for more than a configured limit allows; asking the same
    again fails again, asking for less (or raising the setting) works."""

    kind = ErrorKind.OVER_LIMIT


class UnknownOutcomeError(FlowledgerBaseError):
    """A write may or may not have landed and reading back could not tell: never the same
    as a conflict. Every package's unknown outcome subclasses this (with its own base)."""

    kind = ErrorKind.UNKNOWN_OUTCOME


class DataIntegrityError(FlowledgerBaseError):
    """Kind base: a committed object fails its checksum, cannot be decoded, or is missing
    although the commit that made it is durable. Retrying does not help."""

    kind = ErrorKind.INTEGRITY


class UnavailableError(FlowledgerBaseError):
    """Kind base: the object store or the service cannot answer now (unreachable, timed out,
    throttled, busy); nothing of this request landed, the same request may work later."""

    kind = ErrorKind.UNAVAILABLE


class StorageFullError(FlowledgerBaseError):
    """Kind base: no room to write (a full disk, a quota, containers over their limit)."""

    kind = ErrorKind.STORAGE_FULL


#: The kind bases, one per kind.
KIND_BASES: tuple[type[FlowledgerBaseError], ...] = (
    InvalidInputError,
    ForbiddenError,
    NotFoundError,
    ConflictError,
    RefusedError,
    OverLimitError,
    UnknownOutcomeError,
    DataIntegrityError,
    UnavailableError,
    StorageFullError,
)

_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def kind_of(exc: BaseException) -> ErrorKind | None:
    """The kind of `exc`; None for an error no package raised on purpose (a bug).

    Errors from outside the project that commands let through are a caller's problem too:
    a `ValueError` or a folder given for a file is invalid input, a missing or unreadable
    local file is not found or forbidden, a full disk is full; any other `OSError` is the
    machine failing us now."""
    if isinstance(exc, FlowledgerBaseError):
        return exc.kind
    if isinstance(exc, FileNotFoundError):
        return ErrorKind.NOT_FOUND
    if isinstance(exc, NotADirectoryError | IsADirectoryError):
        return ErrorKind.INVALID_INPUT  # a folder given for a file, or the other way round
    if isinstance(exc, PermissionError):
        return ErrorKind.FORBIDDEN
    if isinstance(exc, OSError):
        return ErrorKind.STORAGE_FULL if exc.errno in _FULL else ErrorKind.UNAVAILABLE
    if isinstance(exc, ValueError):
        return ErrorKind.INVALID_INPUT
    return None
