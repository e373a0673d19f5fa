"""Table URIs as the user names them (`s3a://`, `s3://`, `file://`, relative) mapped to the
flowledger store URI (`s3://`, `file://`) and to the path Spark reads and writes (`s3a://`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from storage.s3a import to_spark_path
from storage.uri import DEFAULT_REPO, REPO_ENV, parse_uri

from .commit_info import REPO_CONF_KEY


@dataclass(frozen=True)
class TablePath:
    given: str  # as the user wrote it
    store_uri: str  # s3://bucket/prefix or file:///abs/path
    spark_uri: str  # s3a://bucket/prefix or file:///abs/path

    def spark_file(self, key: str) -> str:
        """The Spark path of an object under the table root."""
        return f"{self.spark_uri}/{key}"


def table_path(uri: str) -> TablePath:
    parsed = parse_uri(uri)  # accepts s3a:// as s3://, relative paths as file://
    return TablePath(uri, str(parsed), to_spark_path(str(parsed)))


def resolve_repo_uri(option: str | None, conf: Mapping[str, str]) -> str:
    """Where provenance goes: writer option `repo`, Spark conf, $FLOWLEDGER_REPO, default."""
    return option or conf.get(REPO_CONF_KEY) or os.environ.get(REPO_ENV) or DEFAULT_REPO
