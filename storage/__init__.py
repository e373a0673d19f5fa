"""Object-store layer: one small interface, a backend per module (S3, local filesystem).

The S3 backend (boto3) is imported on first use of `S3ObjectStore` or of an `s3://` URI, so
importing `storage` (and `timeline`, `provenance`) loads no boto3.
"""

from typing import TYPE_CHECKING, Any

from .append_log import HEADER_SIZE as LOG_HEADER_SIZE
from .append_log import AppendLog, LogBlock, log_reader, read_log_block, scan_log
from .documents import JsonDocument, read_document, write_document
from .error_kinds import (
    KIND_BASES,
    ConflictError,
    DataIntegrityError,
    ErrorKind,
    FlowledgerBaseError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    OverLimitError,
    RefusedError,
    StorageFullError,
    UnavailableError,
    UnknownOutcomeError,
    kind_of,
)
from .errors import (
    AccessDenied,
    BackendError,
    BucketMissing,
    Conflict,
    EndpointTimeout,
    EndpointUnreachable,
    IntegrityError,
    InvalidKey,
    InvalidURI,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
    StorageFull,
    UnknownOutcome,
    UnsafeBackend,
)
from .integrity import checksum_of, open_blob, open_json, seal_blob, seal_json, verify
from .keys import MAX_KEY_BYTES, validate_key
from .lifecycle import Closing, Finishing
from .local import LocalObjectStore
from .objectstore import ByteRange, ListPage, ObjectInfo, ObjectStore, ObjectWriter, RequestStats
from .progress import ProgressCallback, report_progress
from .ranged_file import FetchedRanges, RangedFile
from .settings import StoreSettings
from .timeutil import datetime_to_ms, ms_to_datetime, now_ms, to_ms
from .upload_buffers import MemoryRoom
from .uri import DEFAULT_REPO, RepoURI, open_store, parse_uri, resolve_repo

if TYPE_CHECKING:
    from .s3 import S3ObjectStore


def __getattr__(name: str) -> Any:
    if name == "S3ObjectStore":
        from .s3 import S3ObjectStore

        return S3ObjectStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_REPO",
    "KIND_BASES",
    "LOG_HEADER_SIZE",
    "MAX_KEY_BYTES",
    "AccessDenied",
    "AppendLog",
    "BackendError",
    "BucketMissing",
    "ByteRange",
    "Closing",
    "Conflict",
    "ConflictError",
    "DataIntegrityError",
    "EndpointTimeout",
    "EndpointUnreachable",
    "ErrorKind",
    "FetchedRanges",
    "Finishing",
    "FlowledgerBaseError",
    "ForbiddenError",
    "IntegrityError",
    "InvalidInputError",
    "InvalidKey",
    "InvalidURI",
    "JsonDocument",
    "ListPage",
    "LocalObjectStore",
    "LogBlock",
    "MemoryRoom",
    "NotFound",
    "NotFoundError",
    "ObjectInfo",
    "ObjectStore",
    "ObjectWriter",
    "OverLimitError",
    "ProgressCallback",
    "RangeNotSatisfiable",
    "RangedFile",
    "RefusedError",
    "RepoURI",
    "RequestStats",
    "S3ObjectStore",
    "StorageError",
    "StorageFull",
    "StorageFullError",
    "StoreSettings",
    "UnavailableError",
    "UnknownOutcome",
    "UnknownOutcomeError",
    "UnsafeBackend",
    "checksum_of",
    "datetime_to_ms",
    "kind_of",
    "log_reader",
    "ms_to_datetime",
    "now_ms",
    "open_blob",
    "open_json",
    "open_store",
    "parse_uri",
    "read_document",
    "read_log_block",
    "report_progress",
    "resolve_repo",
    "scan_log",
    "seal_blob",
    "seal_json",
    "to_ms",
    "validate_key",
    "verify",
    "write_document",
]
