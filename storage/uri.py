"""Repository URIs: `./path`, `file://PATH`, `s3://bucket/prefix` (and `s3a://`)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import InvalidURI
from .objectstore import ObjectStore
from .settings import StoreSettings

DEFAULT_REPO = "./flowledger-data"
REPO_ENV = "FLOWLEDGER_REPO"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class RepoURI:
    scheme: str  # "file" or "s3"
    bucket: str  # "" for file
    path: str  # directory for file, key prefix for s3

    def __str__(self) -> str:
        if self.scheme == "file":
            return "file://" + self.path
        return f"s3://{self.bucket}/{self.path}".rstrip("/")


def resolve_repo(uri: str | None = None) -> str:
    """The repository URI in force: explicit, else $FLOWLEDGER_REPO, else the embedded default."""
    return uri or os.environ.get(REPO_ENV) or DEFAULT_REPO


def parse_uri(uri: str) -> RepoURI:
    if not uri or not uri.strip():
        raise InvalidURI("empty repository URI: use a path, file://PATH or s3://BUCKET/PREFIX")
    if "://" not in uri:
        return RepoURI("file", "", os.path.abspath(uri))
    scheme, rest = uri.split("://", 1)
    scheme = scheme.lower()
    if scheme == "file":
        if not rest:
            raise InvalidURI(f"repository URI {uri!r} has no path: use file://PATH", uri)
        return RepoURI("file", "", os.path.abspath(rest))
    if scheme in ("s3", "s3a"):
        parts = urlsplit("s3://" + rest)
        bucket = parts.netloc
        if not bucket:
            raise InvalidURI(f"repository URI {uri!r} has no bucket: use s3://BUCKET/PREFIX", uri)
        if not _BUCKET.match(bucket) or ".." in bucket:
            raise InvalidURI(
                f"repository URI {uri!r}: {bucket!r} is not a valid S3 bucket name "
                "(3-63 lowercase letters, digits, '.' or '-')",
                uri,
            )
        if parts.query or parts.fragment:
            raise InvalidURI(f"repository URI {uri!r}: query strings are not supported", uri)
        prefix = parts.path.strip("/")
        # S3 keys are not paths: `..` and `.` would be literal key segments (and mean something
        # else to every tool that treats them as paths); an empty segment is a typo.
        for segment in prefix.split("/") if prefix else []:
            if segment in ("", ".", ".."):
                what = "an empty path segment" if not segment else f"a {segment!r} path segment"
                raise InvalidURI(
                    f"repository URI {uri!r} has {what}: S3 prefixes are literal keys, "
                    "write the prefix out in full (s3://BUCKET/a/b)",
                    uri,
                )
        return RepoURI("s3", bucket, prefix)
    raise InvalidURI(
        f"unsupported repository URI scheme {scheme!r} in {uri!r}: use a local path, "
        "file://PATH or s3://BUCKET/PREFIX",
        uri,
    )


def open_store(uri: str | None = None, settings: StoreSettings | None = None) -> ObjectStore:
    """Open the object store a repository URI names (see `resolve_repo` for the default)."""
    parsed = parse_uri(resolve_repo(uri))
    if parsed.scheme == "file":
        from .local import LocalObjectStore

        return LocalObjectStore.open(parsed.path, settings)
    from .s3 import S3ObjectStore

    return S3ObjectStore(parsed.bucket, parsed.path, settings)
