"""Errors of the service. Each has a kind (storage/error_kinds.py), and the kind decides the
HTTP status (flowledger/errors.py), as for every other package's errors. Answers that HTTP
itself prescribes (401 without the token, 416 for a `Range` past the end, 422 for a body
that does not match its model) are the HTTP layer's, not errors of a kind."""

from __future__ import annotations

from storage import ForbiddenError, InvalidInputError, NotFoundError, OverLimitError
from storage import UnavailableError as _Unavailable

from ..errors import FlowledgerError


class ServiceError(FlowledgerError):
    """Base class of every error raised by the service."""


class InvalidRequest(ServiceError, InvalidInputError):
    """Bad input the caller can fix (a body that is not UTF-8, SQL that does not parse)."""


class Forbidden(ServiceError, ForbiddenError):
    """Not allowed through the service (a SQL statement kind, a path outside the repo)."""


class ServiceNotFound(ServiceError, NotFoundError):
    """No such query, table or content (never there, expired or deleted)."""


class QueryOverLimit(ServiceError, OverLimitError):
    """A query that needs more than a limit the operator set (`sql_memory_limit`): the same
    query fails again; a narrower one, or a raised setting, works."""


class QueryTimeout(QueryOverLimit):
    """A query past `sql_timeout_s`: over a limit like an answer over its size, so the same
    query fails again (a 408 would invite clients to repeat it, RFC 9110)."""


class Busy(ServiceError, _Unavailable):
    """Too many requests of a kind at once: refused at once, with `Retry-After`."""

    retry_after_s = 1
    headers = {"Retry-After": str(retry_after_s)}


class AnswerTooLarge(ServiceError, OverLimitError):
    """An answer over a size limit the caller can stay under (fewer rows or columns)."""
