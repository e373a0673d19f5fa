"""The hand-signed read path the S3 backend used before obstore (kept here as the reference
`bench/s3_read_clients.py` measures obstore against): GETs and HEADs without botocore's
per-call machinery.

A warm provenance lookup is ~10 ranged GETs of 30-110 KB and a HEAD; botocore spent ~0.9 ms
of CPU on each (parameter validation, ~12 event hooks, serialisation, response parsing)
where signing the request with botocore's own SigV4 signer and sending it on a urllib3 pool
costs ~0.35 ms (measured against a local server; 2-3x both under load).

Only the answers "here are your bytes" (GET 200/206), "here it is" (HEAD 200) and "no such
object" (a HEAD's 404, a GET's 404 NoSuchKey: raised as the `ClientError` botocore raises)
are taken from this path. Anything else (another status, a dropped or refused connection,
TLS trouble) returns None and the caller sends the request again through botocore, which
retries, classifies and translates what it gets as before: a read changes nothing, so
sending it twice is safe. A read timeout is raised as botocore's `ReadTimeoutError`, so that
a hung endpoint still fails after one `connection_timeout` (see `StoreSettings.retry_limit`).

Used only where its request is the one botocore would send: an explicit endpoint with
path-style addressing (MinIO, on-premises S3), static keys, no proxy configured.
"""

from __future__ import annotations

import urllib.request
from datetime import datetime
from email.utils import parsedate_to_datetime
from urllib.parse import quote, urlsplit

import urllib3
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, ReadTimeoutError
from botocore.httpsession import get_cert_path

from storage import StoreSettings


class FastReads:
    """Signs and sends GETs and HEADs; one connection pool per store (and its views)."""

    def __init__(self, settings: StoreSettings, endpoint: str, access_key: str, secret: str):
        self._endpoint = endpoint.rstrip("/")
        self._signer = S3SigV4Auth(Credentials(access_key, secret), "s3", settings.region)
        timeout = urllib3.Timeout(
            connect=settings.connection_establish_timeout, read=settings.connection_timeout
        )
        https = self._endpoint.startswith("https")
        self._pool = urllib3.PoolManager(
            maxsize=settings.connection_maximum,
            timeout=timeout,
            retries=False,
            cert_reqs="CERT_REQUIRED" if https else None,
            ca_certs=get_cert_path(True) if https else None,
        )

    @classmethod
    def for_settings(cls, settings: StoreSettings) -> FastReads | None:
        """The fast path if this store's requests can take it, else None (botocore only)."""
        endpoint = settings.endpoint_url
        path_style = settings.path_style_access is not False  # None: path style with endpoint
        key, secret = settings.access_key_id, settings.secret_access_key
        if endpoint is None or not path_style or not key or not secret:
            return None
        if urlsplit(endpoint).scheme not in ("http", "https") or _proxied(endpoint):
            return None  # botocore routes through the proxy; this path would not
        return cls(settings, endpoint, key, secret)

    def _send(
        self, method: str, bucket: str, s3_key: str, headers: dict[str, str]
    ) -> urllib3.BaseHTTPResponse | None:
        url = f"{self._endpoint}/{bucket}/{quote(s3_key, safe='/~')}"
        req = AWSRequest(method, url, headers=headers)
        try:
            self._signer.add_auth(req)
            # The stored bytes, as botocore returns them: never decoded by Content-Encoding.
            headers = dict(req.headers.items())
            return self._pool.request(method, url, headers=headers, decode_content=False)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise ReadTimeoutError(endpoint_url=url, error=exc) from exc
        except (urllib3.exceptions.HTTPError, OSError, ValueError):
            return None

    def get(self, bucket: str, s3_key: str, start: int, length: int | None) -> bytes | None:
        """Bytes [start, start+length) of the object (to its end for None); None when the
        answer was anything but the bytes (the caller asks botocore)."""
        headers = {}
        if start or length is not None:
            end = "" if length is None else str(start + length - 1)
            headers["Range"] = f"bytes={start}-{end}"
        resp = self._send("GET", bucket, s3_key, headers)
        if resp is not None and resp.status == 404 and b"<Code>NoSuchKey</Code>" in resp.data:
            _not_found(resp, "NoSuchKey", "GetObject")  # a probe of a key not written yet
        if resp is None or resp.status not in (200, 206):
            return None
        return resp.data

    def head(self, bucket: str, s3_key: str) -> tuple[int, str, datetime | None] | None:
        """(size, ETag, last modified) of the object; None: ask botocore. No such object
        raises botocore's 404 `ClientError`, as botocore's HEAD does."""
        resp = self._send("HEAD", bucket, s3_key, {})
        if resp is not None and resp.status == 404:
            _not_found(resp, "404", "HeadObject")  # no body: botocore's code is the status
        if resp is None or resp.status != 200:
            return None
        size, etag = resp.headers.get("Content-Length"), resp.headers.get("ETag")
        if size is None or etag is None:
            return None
        modified = resp.headers.get("Last-Modified")
        try:
            return int(size), etag, parsedate_to_datetime(modified) if modified else None
        except (TypeError, ValueError):
            return None  # unparsable here: botocore reads it


def _not_found(resp: urllib3.BaseHTTPResponse, code: str, operation: str) -> None:
    """Raise what botocore raises for this 404 (translated by the caller's one call site)."""
    meta = {"HTTPStatusCode": 404, "HTTPHeaders": dict(resp.headers.items())}
    error = {"Error": {"Code": code, "Message": "Not Found"}, "ResponseMetadata": meta}
    raise ClientError(error, operation)  # type: ignore[arg-type]


def _proxied(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    proxies = urllib.request.getproxies()
    return parts.scheme in proxies and not urllib.request.proxy_bypass(parts.hostname or "")
