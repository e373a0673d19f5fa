"""Fresh repositories on each backend (local filesystem, moto, MinIO) for parametrized fixtures.

The fixtures themselves (`backend`, `tbackend`, `store`, `make_store`) are registered once in
tests/conftest.py; tests import only the `Backend` type and the tier params from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from storage import ObjectStore, StoreSettings, open_store
from tests.support.servers import S3Endpoint

LOCAL = pytest.param("local", marks=pytest.mark.unit, id="local")
MOTO = pytest.param("moto", marks=pytest.mark.s3, id="moto")
MINIO = pytest.param("minio", marks=pytest.mark.minio, id="minio")
ALL_BACKENDS = [LOCAL, MOTO, MINIO]
LOCAL_AND_MINIO = [LOCAL, MINIO]


@dataclass(frozen=True)
class Backend:
    """How to open (from any process) a fresh store on one backend."""

    name: str
    uri: str
    settings: StoreSettings
    endpoint: S3Endpoint | None = None

    def open(self, **overrides: object) -> ObjectStore:
        settings = self.settings
        if overrides:
            settings = StoreSettings(**{**settings.__dict__, **overrides})  # type: ignore[arg-type]
        return open_store(self.uri, settings)


def make_backend(request: pytest.FixtureRequest, tmp_path: Path, name: str) -> Backend:
    """A fresh repository on backend `name`: a folder under tmp_path, or a new bucket on the
    session's moto or MinIO server (the `moto`/`minio` fixture, looked up by name)."""
    if name == "local":
        return Backend("local", "file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    endpoint: S3Endpoint = request.getfixturevalue(name)
    bucket = endpoint.new_bucket()
    return Backend(name, f"s3://{bucket}/repo", endpoint.settings(), endpoint)
