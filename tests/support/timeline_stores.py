"""Stores for timeline tests: the local backend and MinIO (the tiers the issue asks for)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import StoreSettings
from tests.conftest import Backend

LOCAL_AND_MINIO = [
    pytest.param("local", marks=pytest.mark.unit, id="local"),
    pytest.param("minio", marks=pytest.mark.minio, id="minio"),
]


def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    name = request.param
    if name == "local":
        return Backend("local", "file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    endpoint = request.getfixturevalue(name)
    bucket = endpoint.new_bucket()
    return Backend(name, f"s3://{bucket}/repo", endpoint.settings(), endpoint)


ALL_TIERS = [*LOCAL_AND_MINIO, pytest.param("moto", marks=pytest.mark.s3, id="moto")]


@pytest.fixture(params=LOCAL_AND_MINIO)
def tbackend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A fresh repository on the local backend or on MinIO."""
    return make_backend(request, tmp_path)


@pytest.fixture(params=ALL_TIERS)
def any_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A fresh repository on the local backend, MinIO or moto's server."""
    return make_backend(request, tmp_path)
