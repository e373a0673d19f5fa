"""The curated tables, written and read through the timeline by `flowledger.spark`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from storage import ObjectStore
from storage.s3a import to_spark_path
from timeline import Table

from .. import spark as api
from ..spark import CommitInfo
from ..table_settings import table_settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FLIGHTS_ENRICHED = "flights_enriched"
DELAYS_BY_CARRIER = "delays_by_carrier"


def session(repo: str, master: str | None) -> SparkSession:
    """A SparkSession set up for the repository (s3a settings and jars when it is on S3)."""
    spark: SparkSession = api.session(
        repo=repo,
        master=master,
        app_name="flowledger-pipeline",
        conf={"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write(
    df: DataFrame, uri: str, mode: str, partition_by: Sequence[str] | None = None
) -> CommitInfo:
    # The pipeline's sessions record each curated file's SEND (with its bytes, so it can be
    # replayed); the generic Spark provenance hook would record a second, content-less one.
    return api.write(
        df, uri, mode=mode, partition_by=list(partition_by) if partition_by else None, hooks=()
    )


def read(spark: SparkSession, uri: str, as_of: str | None = None) -> DataFrame:
    df: DataFrame = api.read(spark, uri, as_of=as_of)
    return df


class Tables:
    """Where the pipeline's tables live: `<repo>/tables/<name>`."""

    def __init__(self, repo_uri: str, root: ObjectStore) -> None:
        self.repo_uri = repo_uri
        self.root = root
        self.spark_root = to_spark_path(repo_uri)

    def uri(self, name: str) -> str:
        return f"{self.spark_root}/tables/{name}"

    def table(self, name: str) -> Table:
        return Table.open(self.root.scoped(f"tables/{name}"), table_settings())

    def key_of(self, uri: str) -> str:
        """The repository key of a file Spark named (`file:/x`, `file:///x`, `s3a://b/x`)."""

        def norm(u: str) -> str:
            scheme, _, rest = u.partition(":")
            return f"{scheme}:" + "/" + rest.lstrip("/")

        root, path = norm(self.spark_root).rstrip("/") + "/", norm(uri)
        if not path.startswith(root):
            raise ValueError(f"{uri} is not under the repository {self.spark_root}")
        return path[len(root) :]

    def read_file(self, uri: str) -> bytes:
        return self.root.get(self.key_of(uri))
