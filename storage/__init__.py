"""Object-store layer: one small interface, a backend per module (S3, local filesystem)."""

from .errors import (
    AccessDenied,
    BackendError,
    BucketMissing,
    Conflict,
    ConflictError,
    EndpointTimeout,
    EndpointUnreachable,
    FlowledgerBaseError,
    IntegrityError,
    InvalidKey,
    InvalidURI,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
    UnknownOutcome,
    UnknownOutcomeError,
    UnsafeBackend,
)
from .integrity import checksum_of, open_blob, open_json, seal_blob, seal_json, verify
from .keys import MAX_KEY_BYTES, validate_key
from .local import LocalObjectStore
from .objectstore import ByteRange, ListPage, ObjectInfo, ObjectStore, ObjectWriter, RequestStats
from .progress import ProgressCallback, report_progress
from .s3 import S3ObjectStore
from .settings import StoreSettings
from .timeutil import datetime_to_ms, ms_to_datetime, now_ms, to_ms
from .uri import DEFAULT_REPO, RepoURI, open_store, parse_uri, resolve_repo

__all__ = [
    "DEFAULT_REPO",
    "MAX_KEY_BYTES",
    "AccessDenied",
    "BackendError",
    "BucketMissing",
    "ByteRange",
    "Conflict",
    "ConflictError",
    "EndpointTimeout",
    "EndpointUnreachable",
    "FlowledgerBaseError",
    "IntegrityError",
    "InvalidKey",
    "InvalidURI",
    "ListPage",
    "LocalObjectStore",
    "NotFound",
    "ObjectInfo",
    "ObjectStore",
    "ObjectWriter",
    "ProgressCallback",
    "RangeNotSatisfiable",
    "RepoURI",
    "RequestStats",
    "S3ObjectStore",
    "StorageError",
    "StoreSettings",
    "UnknownOutcome",
    "UnknownOutcomeError",
    "UnsafeBackend",
    "checksum_of",
    "datetime_to_ms",
    "ms_to_datetime",
    "now_ms",
    "open_blob",
    "open_json",
    "open_store",
    "parse_uri",
    "report_progress",
    "resolve_repo",
    "seal_blob",
    "seal_json",
    "to_ms",
    "validate_key",
    "verify",
]
