"""Errors of the service, each with the HTTP status it answers with (one clear message)."""

from __future__ import annotations


class ServiceError(Exception):
    """Bad input the caller can fix: 400."""

    status = 400


class Forbidden(ServiceError):
    """Not allowed through the service (a SQL statement kind, a path outside the repo)."""

    status = 403


class NotFoundError(ServiceError):
    status = 404


class Gone(ServiceError):
    """It existed but is no longer there (content removed, query expired)."""

    status = 410


class QueryTimeout(ServiceError):
    status = 408


class Busy(ServiceError):
    """Too many requests of a kind at once: refused at once, with `Retry-After`."""

    status = 429
    retry_after_s = 1
    headers = {"Retry-After": str(retry_after_s)}


class AnswerTooLarge(ServiceError):
    """An answer over a size limit the caller can stay under (fewer rows or columns)."""

    status = 413


class RangeNotSatisfiable(ServiceError):
    """A `Range` that starts past the end of the content."""

    status = 416

    def __init__(self, message: str, length: int) -> None:
        super().__init__(message)
        self.headers = {"Content-Range": f"bytes */{length}"}
