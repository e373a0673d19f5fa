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


class TooLarge(ServiceError):
    status = 413


class Busy(ServiceError):
    status = 429


class RangeNotSatisfiable(ServiceError):
    """A `Range` that starts past the end of the content."""

    status = 416

    def __init__(self, message: str, length: int) -> None:
        super().__init__(message)
        self.headers = {"Content-Range": f"bytes */{length}"}
