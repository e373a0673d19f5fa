"""One read adapter per S3 client, behind the interface `storage.s3_fast.FastReads` offers the
store: `get(bucket, key, start, length)` -> bytes and `head(bucket, key)` -> (size, ETag, last
modified), None for anything but the happy answer (the store then asks botocore, which retries,
classifies and translates), botocore's 404 `ClientError` for "no such object" (translated at
the store's one call site). So each client serves exactly the reads s3_fast serves today, and
everything above the store — the checksums every reader verifies included — is unchanged.

`open_read` adds the streaming read a large content download uses (today: botocore's body
stream, for s3_fast and botocore alike); None keeps the store's own.

* `obstore`: Rust `object_store` (reqwest/hyper, its own SigV4), one `S3Store` per bucket.
* `pyarrow`: Arrow C++'s `S3FileSystem` (AWS C++ SDK). Its files expose no ETag, so `head`
  stays on botocore; opening a file for a ranged read sends a HEAD first (the C++ API can skip
  it with a known size, the Python binding cannot).
* `s3_fast`: the store's own default (`storage/s3_fast.py`).
* `botocore`: no adapter: every read through boto3's client.
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlsplit

from botocore.exceptions import ClientError

from storage import StoreSettings
from storage.s3 import S3ObjectStore, make_client
from storage.s3_fast import FastReads

CLIENTS = ("obstore", "pyarrow", "s3_fast", "botocore")


class ReadAdapter(Protocol):
    def get(self, bucket: str, s3_key: str, start: int, length: int | None) -> bytes | None: ...

    def head(self, bucket: str, s3_key: str) -> tuple[int, str, datetime | None] | None: ...


def not_found(operation: str) -> ClientError:
    """What botocore raises for a missing object (a GET's NoSuchKey, a HEAD's bare 404)."""
    code = "NoSuchKey" if operation == "GetObject" else "404"
    error = {"Error": {"Code": code, "Message": "Not Found"},
             "ResponseMetadata": {"HTTPStatusCode": 404}}  # fmt: skip
    return ClientError(error, operation)  # type: ignore[arg-type]


class ObstoreReads:
    def __init__(self, settings: StoreSettings, bucket: str) -> None:
        from obstore.store import S3Store

        endpoint = settings.endpoint_url or ""
        self._store = S3Store(
            bucket,
            endpoint=endpoint or None,
            region=settings.region,
            access_key_id=settings.access_key_id,
            secret_access_key=settings.secret_access_key,
            virtual_hosted_style_request=settings.path_style_access is False,
            client_options={
                "allow_http": urlsplit(endpoint).scheme == "http",
                "connect_timeout": f"{settings.connection_establish_timeout}s",
                "timeout": f"{settings.connection_timeout}s",
            },
            retry_config={"max_retries": 0},  # like s3_fast: anything unhappy goes to botocore
        )

    def get(self, bucket: str, s3_key: str, start: int, length: int | None) -> bytes | None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            if length is None:
                opts: Any = {"range": {"offset": start}} if start else None
                return obstore.get(self._store, s3_key, options=opts).bytes().to_bytes()
            return obstore.get_range(self._store, s3_key, start=start, length=length).to_bytes()
        except (NotFoundError, FileNotFoundError):  # obstore raises the builtin
            raise not_found("GetObject") from None
        except Exception:  # every other answer: botocore sends it again
            return None

    def get_buffer(self, s3_key: str, start: int, length: int) -> Any:
        """The range as obstore's buffer (errors as they come: the caller's stream)."""
        import obstore

        return obstore.get_range(self._store, s3_key, start=start, length=length)

    def head(self, bucket: str, s3_key: str) -> tuple[int, str, datetime | None] | None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            meta = obstore.head(self._store, s3_key)
        except (NotFoundError, FileNotFoundError):  # obstore raises the builtin
            raise not_found("HeadObject") from None
        except Exception:
            return None
        etag = meta["e_tag"]
        return None if etag is None else (meta["size"], etag, meta["last_modified"])


class PyarrowReads:
    def __init__(self, settings: StoreSettings, bucket: str) -> None:
        from pyarrow import fs

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

    def get(self, bucket: str, s3_key: str, start: int, length: int | None) -> bytes | None:
        try:
            with self._fs.open_input_file(f"{bucket}/{s3_key}") as f:
                if length is None:
                    f.seek(start)
                    return bytes(f.read())
                return bytes(f.read_at(length, start))
        except FileNotFoundError:
            raise not_found("GetObject") from None
        except Exception:
            return None

    def head(self, bucket: str, s3_key: str) -> tuple[int, str, datetime | None] | None:
        return None  # no ETag through pyarrow's file API: botocore's HEAD


def adapter(client: str, settings: StoreSettings, bucket: str) -> ReadAdapter | None:
    if client == "obstore":
        return ObstoreReads(settings, bucket)
    if client == "pyarrow":
        return PyarrowReads(settings, bucket)
    if client == "s3_fast":
        return FastReads.for_settings(settings)
    if client == "botocore":
        return None
    raise ValueError(f"unknown client {client!r} (one of {', '.join(CLIENTS)})")


class AdapterStore(S3ObjectStore):
    """The S3 store with its GETs and HEADs through `client`'s adapter (and, for obstore and
    pyarrow, the streaming reads of large contents too, as one ranged GET per part)."""

    def __init__(self, bucket: str, prefix: str, settings: StoreSettings, client: str) -> None:
        self.read_client = client
        self._adapter = adapter(client, settings, bucket)
        super().__init__(
            bucket,
            prefix,
            settings,
            client=make_client(settings),
            fast_reads=self._adapter,  # type: ignore[arg-type]
        )

    def scoped(self, prefix: str) -> AdapterStore:
        view = super().scoped(prefix)
        scoped = AdapterStore.__new__(AdapterStore)
        scoped.__dict__.update(view.__dict__)
        scoped.read_client, scoped._adapter = self.read_client, self._adapter
        return scoped

    def open_read(self, key: str, start: int = 0, length: int | None = None) -> BinaryIO:
        if isinstance(self._adapter, ObstoreReads) and length:
            # obstore's buffer read in place: no copy into bytes, none into a BytesIO.
            return _View(self._adapter.get_buffer(self.prefix + key, start, length))
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
