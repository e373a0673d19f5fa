"""The curated tables: keyed tables on the timeline (docs/tables.md), read by
`flowledger.spark`. The pipeline writes them through the Python path (`Table.write` /
`upsert` / `delete`) from the Arrow form of its DataFrames.

`flights_enriched` is merge-on-read: a correction is a delta commit appending log files to the
file groups it touches, read merged (snapshot) or without them (read-optimized) until the
pipeline compacts it explicitly (its writes never compact inline: `compaction_mode="off"`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING

import pyarrow as pa

from storage import ObjectStore
from storage.s3a import to_spark_path
from timeline import Entry, Table, TableSettings
from timeline.keyed import KeyedProperties, TableType

from .. import spark as api
from ..context import table_settings
from ..spark import CommitInfo, OutputFile, SparkJobInfo

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FLIGHTS_ENRICHED = "flights_enriched"
DELAYS_BY_CARRIER = "delays_by_carrier"
PLANES = "planes"

#: The curated tables' properties: flights by their surrogate key (transform.FLIGHT_KEY),
#: partitioned by month, merge-on-read; the aggregate by carrier (copy-on-write: a few dozen
#: rows); the planes by tail number (copy-on-write, written by a streamed insert). The
#: latest write wins.
PROPERTIES = MappingProxyType(
    {
        FLIGHTS_ENRICHED: KeyedProperties.of(
            "flight_id", partition_by="month", table_type=TableType.MERGE_ON_READ
        ),
        DELAYS_BY_CARRIER: KeyedProperties.of("carrier"),
        PLANES: KeyedProperties.of("tailnum"),
    }
)

#: Commit-metadata key of a `delays_by_carrier` commit: the `flights_enriched` instant its
#: rows were computed from (where the next incremental recomputation starts).
SOURCE_INSTANT = "flowledger.pipeline.source_instant"


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

    def __init__(
        self, repo_uri: str, root: ObjectStore, settings: TableSettings | None = None
    ) -> None:
        self.repo_uri = repo_uri
        self.root = root
        #: Every table's base settings (the CLI's archival switch among them).
        self.base_settings = settings or table_settings()
        self.spark_root = to_spark_path(repo_uri)

    def uri(self, name: str) -> str:
        return f"{self.spark_root}/tables/{name}"

    def settings(self, name: str) -> TableSettings:
        """The base settings; a merge-on-read table's delta commits leave compaction to
        the pipeline's own compaction stage, so the report can show the logs before it."""
        s = self.base_settings
        props = PROPERTIES.get(name)  # tables without properties are unkeyed
        if props is not None and props.table_type == TableType.MERGE_ON_READ:
            return replace(s, compaction_mode="off")
        return s

    def table(self, name: str) -> Table:
        return Table.open(self.root.scoped(f"tables/{name}"), self.settings(name))

    def keyed(self, name: str) -> Table:
        """The table, created with its properties (PROPERTIES) on first use; a no-op later.
        A table an older pipeline wrote with other properties (unkeyed, or copy-on-write) is
        refused by the timeline in one line."""
        store = self.root.scoped(f"tables/{name}")
        return Table.create(store, PROPERTIES[name], self.settings(name))

    def commit_info(self, name: str, table: Table, entry: Entry, job: str) -> CommitInfo:
        """A commit of the Python path described as the Spark writers describe theirs (the
        provenance recorder takes either)."""
        files = tuple(
            OutputFile(f"{self.uri(name)}/{f.path}", f.rows, f.size, f.partition)
            for f in entry.added
        )
        return CommitInfo(
            table_uri=self.uri(name),
            instant_time=entry.time,
            action=entry.action,
            operation=str(entry.metadata.get("operation", "")),
            files=files,
            job=SparkJobInfo("flowledger-pipeline", "flowledger-pipeline", job),
        )

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


def arrow(df: DataFrame) -> pa.Table:
    """A DataFrame collected as Arrow for the Python-path writes."""
    table: pa.Table = df.toArrow()
    return table
