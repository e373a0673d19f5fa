"""GETs and HEADs through obstore (Rust `object_store`): the S3 backend's read path.

A warm provenance lookup is ~10 ranged GETs of 30-110 KB and a HEAD; botocore spends ~0.9 ms
of CPU on each (parameter validation, event hooks, serialisation, response parsing), obstore
signs and sends them in Rust with the GIL released (docs/benchmarks.md, "Reads through four S3
clients"). Plain PUTs share this client (storage/s3_puts.py); conditional writes, multipart
uploads and copies stay on boto3.

Every endpoint and credential source boto3 serves: an explicit endpoint (MinIO, on-premises S3)
with path style or virtual-hosted addressing, AWS with virtual-hosted addressing when no
endpoint is set (boto3's "auto"); static keys from the settings, else boto3's credential chain
(environment, shared config and profiles, SSO, container and instance roles) through obstore's
boto3 credential provider, refreshed as botocore refreshes them.

Only definite answers are taken from this path: the bytes, an object's size, ETag and date,
"no such object", "access denied" (obstore's errors, translated by `storage/s3_errors.py` at
the store's one call site). obstore retries nothing here; any other failure (refused or dropped
connection, timeout, throttling, 5xx) returns None and the caller sends the request again
through botocore, which retries, bounds and classifies it as for every other request (a read
changes nothing, so sending it twice is safe).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import NotFoundError, PermissionDeniedError, UnauthenticatedError

from .settings import StoreSettings

if TYPE_CHECKING:
    from obstore.store import S3Store

#: obstore's answers that are the object store's verdict, not a failure to get one (a missing
#: object comes as the builtin FileNotFoundError).
DEFINITE = (NotFoundError, FileNotFoundError, PermissionDeniedError, UnauthenticatedError)


class ObjectReads:
    """GETs and HEADs of one bucket through obstore; one connection pool per store (and its
    views)."""

    def __init__(self, store: S3Store) -> None:
        self._store = store

    def get(self, s3_key: str, start: int, length: int | None) -> bytes | None:
        """Bytes [start, start+length) of the object (to its end for None); None when the
        answer was not definite (the caller asks botocore)."""
        try:
            if length is None:
                opts: Any = {"range": {"offset": start}} if start else None
                return obstore.get(self._store, s3_key, options=opts).bytes().to_bytes()
            return obstore.get_range(self._store, s3_key, start=start, length=length).to_bytes()
        except (NotFoundError, FileNotFoundError) as exc:
            if "NoSuchBucket" in str(exc):
                return None  # botocore's answer names the missing bucket
            raise
        except DEFINITE:
            raise
        except Exception:  # any other answer or failure: botocore sends it again
            return None

    def head(self, s3_key: str) -> tuple[int, str, datetime | None] | None:
        """(size, ETag, last modified) of the object; None: ask botocore."""
        try:
            meta = obstore.head(self._store, s3_key)
        except DEFINITE:
            raise
        except Exception:  # any other answer or failure: botocore sends it again
            return None
        etag = meta["e_tag"]
        return None if etag is None else (meta["size"], etag, meta["last_modified"])


def make_store(settings: StoreSettings, bucket: str) -> S3Store | None:
    """obstore's client for `bucket`, addressed and authenticated as boto3's client is; None
    when boto3 finds no credentials either (botocore's request then says so)."""
    from obstore.store import S3Store

    endpoint = settings.endpoint_url
    path_style = settings.path_style_access
    if path_style is None:
        path_style = endpoint is not None  # boto3's "auto": virtual-hosted on AWS
    if endpoint is not None and not path_style:
        # obstore takes a virtual-hosted endpoint with the bucket already in its host name.
        parts = urlsplit(endpoint)
        endpoint = f"{parts.scheme}://{bucket}.{parts.netloc}{parts.path}"
    options: dict[str, Any] = {
        "connect_timeout": f"{settings.connection_establish_timeout}s",
        "timeout": f"{settings.connection_timeout}s",
        "pool_max_idle_per_host": str(settings.connection_maximum),
        "allow_http": endpoint is not None and urlsplit(endpoint).scheme == "http",
    }
    ca_bundle = os.environ.get("AWS_CA_BUNDLE")  # botocore's extra CAs (PEM file)
    if ca_bundle and os.path.isfile(ca_bundle):
        with open(ca_bundle, "rb") as pem:
            options["root_certificate"] = pem.read()
    kwargs: dict[str, Any] = {}
    if settings.access_key_id and settings.secret_access_key:
        kwargs = {
            "access_key_id": settings.access_key_id,
            "secret_access_key": settings.secret_access_key,
        }
        token = os.environ.get("AWS_SESSION_TOKEN")
        if token and settings.access_key_id == os.environ.get("AWS_ACCESS_KEY_ID"):
            kwargs["token"] = token
    else:
        import boto3
        from obstore.auth.boto3 import Boto3CredentialProvider

        session = boto3.Session()
        if session.get_credentials() is None:
            return None
        kwargs = {"credential_provider": Boto3CredentialProvider(session)}
    if endpoint is not None:
        kwargs["endpoint"] = endpoint  # else AWS's, from the region
    # A PUT's body is signed as botocore signs it (StoreSettings.payload_signing): by default
    # over plain http, not over https.
    scheme = urlsplit(endpoint).scheme if endpoint is not None else "https"
    signed = settings.payload_signing if settings.payload_signing is not None else scheme == "http"
    return S3Store(
        bucket,
        region=settings.region,
        unsigned_payload=not signed,
        virtual_hosted_style_request=not path_style,
        client_options=options,  # type: ignore[arg-type]
        retry_config={"max_retries": 0},  # botocore retries what this path hands back
        **kwargs,
    )
