"""`flowledger.spark.read`: exactly the files a completed instant's snapshot names.

The file list comes from commit metadata (never from listing data folders), so files of a
pending or rolled-back write are never read; Spark then reads them with its Parquet reader.
"""

from __future__ import annotations

from typing import Any

from storage import open_store
from timeline import Snapshot, Table

from .conf import conf_of, store_settings, table_settings
from .paths import TablePath, table_path


def snapshot_of(spark: Any, uri: str, as_of: str | None = None) -> tuple[TablePath, Snapshot]:
    conf = conf_of(spark)
    path = table_path(uri)
    table = Table.open(open_store(path.store_uri, store_settings(conf)), table_settings(conf))
    return path, table.snapshot(as_of)


def read(spark: Any, uri: str, as_of: str | None = None) -> Any:
    """A DataFrame over the table's snapshot (latest, or as of instant `as_of`)."""
    path, snap = snapshot_of(spark, uri, as_of)
    if not snap.files:
        from pyspark.sql.types import StructType

        return spark.createDataFrame([], StructType([]))
    return spark.read.parquet(*(path.spark_file(f.path) for f in snap.files))
