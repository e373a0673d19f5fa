"""Fixtures the Spark tests share: the session with the data source registered, its
provenance going to a repository of the test module, and tables on local FS or MinIO."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import flowledger.spark as fs
from flowledger.spark.commit_info import REPO_CONF_KEY
from tests.support.servers import S3Endpoint


@pytest.fixture(scope="module")
def registered(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The shared session with the data source, its provenance going to a repo of this module."""
    spark.conf.set(REPO_CONF_KEY, str(tmp_path_factory.mktemp("repo")))
    fs.register(spark)
    yield spark
    spark.conf.unset(REPO_CONF_KEY)


@pytest.fixture(params=["local", "minio"])
def where(request: pytest.FixtureRequest, tmp_path: Path, minio: S3Endpoint) -> tuple[str, Any]:
    """(table URI as a Spark user names it, StoreSettings) on local FS or MinIO over s3a."""
    if request.param == "local":
        return str(tmp_path / "tables" / "t"), None
    return f"s3a://{minio.new_bucket()}/tables/t", minio.settings()
