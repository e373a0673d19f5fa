"""Object-store layer: one small interface, a backend per module (S3, local filesystem)."""

from .errors import (
    AccessDenied,
    BackendError,
    BucketMissing,
    Conflict,
    EndpointTimeout,
    EndpointUnreachable,
    InvalidKey,
    InvalidURI,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
    UnknownOutcome,
    UnsafeBackend,
)
from .keys import MAX_KEY_BYTES, validate_key
from .local import LocalObjectStore
from .objectstore import ByteRange, ListPage, ObjectInfo, ObjectStore, ObjectWriter, RequestStats
from .s3 import S3ObjectStore
from .settings import StoreSettings
from .uri import DEFAULT_REPO, RepoURI, open_store, parse_uri, resolve_repo

__all__ = [
    "DEFAULT_REPO",
    "MAX_KEY_BYTES",
    "AccessDenied",
    "BackendError",
    "BucketMissing",
    "ByteRange",
    "Conflict",
    "EndpointTimeout",
    "EndpointUnreachable",
    "InvalidKey",
    "InvalidURI",
    "ListPage",
    "LocalObjectStore",
    "NotFound",
    "ObjectInfo",
    "ObjectStore",
    "ObjectWriter",
    "RangeNotSatisfiable",
    "RepoURI",
    "RequestStats",
    "S3ObjectStore",
    "StorageError",
    "StoreSettings",
    "UnknownOutcome",
    "UnsafeBackend",
    "open_store",
    "parse_uri",
    "resolve_repo",
    "validate_key",
]
