"""One read adapter per S3 client, behind the interface `storage.s3_reads.ObjectReads` offers
the store: `get(key, start, length)` -> bytes and `head(key)` -> (size, ETag, last modified),
None for anything but a definite answer (the store then asks botocore, which retries,
classifies and translates), botocore's 404 `ClientError` for "no such object" (translated at
the store's one call site). So each client serves exactly the reads obstore serves, and
everything above the store — the checksums every reader verifies included — is unchanged.

`open_read` adds the streaming read a large content download uses (today: botocore's body
stream, for every client); obstore's own is measured as an option, not adopted.

* `obstore`: Rust `object_store` (reqwest/hyper, its own SigV4), one `S3Store` per bucket:
  the store's default (`storage/s3_reads.py`).
* `pyarrow`: Arrow C++'s `S3FileSystem` (AWS C++ SDK). Its files expose no ETag, so `head`
  stays on botocore; opening a file for a ranged read sends a HEAD first (the C++ API can skip
  it with a known size, the Python binding cannot).
* `s3_fast`: the hand-signed urllib3 path obstore replaced (`bench/s3_fast_reads.py`).
* `botocore`: no adapter: every read through boto3's client.
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlsplit

from botocore.exceptions import ClientError

from bench.s3_fast_reads import FastReads
from storage import StoreSettings
from storage.s3 import S3ObjectStore, make_client, obstore_paths
from storage.s3_reads import make_store

CLIENTS = ("obstore", "pyarrow", "s3_fast", "botocore")


class ReadAdapter(Protocol):
    def get(self, s3_key: str, start: int, length: int | None) -> bytes | None: ...

    def head(self, s3_key: str) -> tuple[int, str, datetime | None] | None: ...


def not_found(operation: str) -> ClientError:
    """What botocore raises for a missing object (a GET's NoSuchKey, a HEAD's bare 404)."""
    code = "NoSuchKey" if operation == "GetObject" else "404"
    error = {"Error": {"Code": code, "Message": "Not Found"},
             "ResponseMetadata": {"HTTPStatusCode": 404}}  # fmt: skip
    return ClientError(error, operation)  # type: ignore[arg-type]


class ObstoreDownload:
    """obstore's ranged GET as its own buffer, for the streaming read of a large content."""

    def __init__(self, settings: StoreSettings, bucket: str) -> None:
        self._store = make_store(settings, bucket)

    def get_buffer(self, s3_key: str, start: int, length: int) -> Any:
        import obstore

        return obstore.get_range(self._store, s3_key, start=start, length=length)


class BoundFastReads:
    """`FastReads` for one bucket."""

    def __init__(self, fast: FastReads, bucket: str) -> None:
        self._fast, self._bucket = fast, bucket

    def get(self, s3_key: str, start: int, length: int | None) -> bytes | None:
        return self._fast.get(self._bucket, s3_key, start, length)

    def head(self, s3_key: str) -> tuple[int, str, datetime | None] | None:
        return self._fast.head(self._bucket, s3_key)


class PyarrowReads:
    def __init__(self, settings: StoreSettings, bucket: str) -> None:
        from pyarrow import fs

        self._bucket = bucket
        parts = urlsplit(settings.endpoint_url or "")
        self._fs = fs.S3FileSystem(
            access_key=settings.access_key_id,
            secret_key=settings.secret_access_key,
            region=settings.region,
            endpoint_override=parts.netloc or None,
            scheme=parts.scheme or "https",
            force_virtual_addressing=settings.path_style_access is False,
            connect_timeout=settings.connection_establish_timeout,
            request_timeout=settings.connection_timeout,
            retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1),
        )

    def get(self, s3_key: str, start: int, length: int | None) -> bytes | None:
        try:
            with self._fs.open_input_file(f"{self._bucket}/{s3_key}") as f:
                if length is None:
                    f.seek(start)
                    return bytes(f.read())
                return bytes(f.read_at(length, start))
        except FileNotFoundError:
            raise not_found("GetObject") from None
        except Exception:
            return None

    def head(self, s3_key: str) -> tuple[int, str, datetime | None] | None:
        return None  # no ETag through pyarrow's file API: botocore's HEAD


def adapter(client: str, settings: StoreSettings, bucket: str) -> ReadAdapter | None:
    if client == "obstore":
        return obstore_paths(settings, bucket)[0]
    if client == "pyarrow":
        return PyarrowReads(settings, bucket)
    if client == "s3_fast":
        fast = FastReads.for_settings(settings)
        return None if fast is None else BoundFastReads(fast, bucket)
    if client == "botocore":
        return None
    raise ValueError(f"unknown client {client!r} (one of {', '.join(CLIENTS)})")


class AdapterStore(S3ObjectStore):
    """The S3 store with its GETs and HEADs through `client`'s adapter (and, for obstore and
    pyarrow, the streaming reads of large contents too, as one ranged GET per part)."""

    def __init__(self, bucket: str, prefix: str, settings: StoreSettings, client: str) -> None:
        self.read_client = client
        self._adapter = adapter(client, settings, bucket)
        self._download = ObstoreDownload(settings, bucket) if client == "obstore" else None
        super().__init__(
            bucket,
            prefix,
            settings,
            client=make_client(settings),
            reads=self._adapter,  # type: ignore[arg-type]
        )

    def scoped(self, prefix: str) -> AdapterStore:
        view = super().scoped(prefix)
        scoped = AdapterStore.__new__(AdapterStore)
        scoped.__dict__.update(view.__dict__)
        scoped.read_client, scoped._adapter = self.read_client, self._adapter
        scoped._download = self._download
        return scoped

    def open_read(self, key: str, start: int = 0, length: int | None = None) -> BinaryIO:
        if self._download is not None and length:
            # obstore's buffer read in place: no copy into bytes, none into a BytesIO.
            return _View(self._download.get_buffer(self.prefix + key, start, length))
        if self.read_client == "pyarrow":
            return io.BytesIO(self.get(key, start, length))
        return super().open_read(key, start, length)


class _View(io.RawIOBase):
    """Reads of a buffer (obstore's `Bytes`) without copying it whole."""

    def __init__(self, buf: Any) -> None:
        self._view, self._pos = memoryview(buf), 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n < 0 else min(len(self._view), self._pos + n)
        chunk = bytes(self._view[self._pos : end])
        self._pos = end
        return chunk
