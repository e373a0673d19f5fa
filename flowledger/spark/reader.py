"""`flowledger.spark.read`: exactly the files a completed instant's snapshot names.

The file list comes from commit metadata (never from listing data folders), so files of a
pending or rolled-back write are never read; Spark then reads them with its Parquet reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from storage import ObjectStore, open_store
from timeline import DataFile, Snapshot, Table, read_verified

from .conf import conf_of, store_settings, table_settings
from .paths import TablePath, table_path


def snapshot_of(
    spark: Any, uri: str, as_of: str | None = None
) -> tuple[TablePath, Snapshot, pa.Schema | None]:
    """The table's path, its snapshot (latest, or as of `as_of`) and its schema then: both
    from one load of the timeline (two would let a commit landing between them pair one
    commit's files with another's schema), the schema at the snapshot's log position."""
    conf = conf_of(spark)
    path = table_path(uri)
    table = Table.open(open_store(path.store_uri, store_settings(conf)), table_settings(conf))
    state = table.state()
    snap = table.snapshot(as_of, refresh=False)
    return path, snap, state.schema(snap.seq)


def verify_files(store: ObjectStore, files: Sequence[DataFile]) -> None:
    """Read every file once and check the crc32 its commit recorded (IntegrityError naming
    the first damaged one). Spark's JVM reader never hands us the bytes, so this is a second
    read of the whole snapshot: opt-in (see docs/spark.md, "Reading", for its measured cost)."""
    with ThreadPoolExecutor(8, "flowledger-verify") as pool:
        list(pool.map(lambda f: read_verified(store, f), files))


def read(spark: Any, uri: str, as_of: str | None = None, verify: bool = False) -> Any:
    """A DataFrame over the table's snapshot (latest, or as of instant `as_of`); with
    `verify`, every file's checksum is checked on the driver first."""
    path, snap, schema = snapshot_of(spark, uri, as_of)
    if snap.merge_on_read_slices() is not None:
        # Parquet alone would show the base files only: the data source merges each slice's
        # logs on the executors (and verifies every object it reads).
        from .datasource import register

        register(spark)
        reader = spark.read.format("flowledger")
        return (reader.option("asOf", as_of) if as_of else reader).load(uri)
    if verify:
        verify_files(open_store(path.store_uri, store_settings(conf_of(spark))), snap.files)
    if not snap.files:
        from pyspark.sql.types import StructType

        return spark.createDataFrame([], StructType([]))
    return _parquet_reader(spark, schema).parquet(*(path.spark_file(f.path) for f in snap.files))


def _parquet_reader(spark: Any, schema: pa.Schema | None) -> Any:
    """Spark's Parquet reader told the table's schema as of the snapshot: left to infer it,
    Spark reads one file's footer, and a column added after that file was written is missing
    from the DataFrame (and an inference job runs). Files written before a column existed
    read it as null, as every flowledger reader does. A schema Spark cannot be told (a type
    it has no equivalent of) is merged from every file's footer instead."""
    reader = spark.read
    if schema is None:
        return reader
    try:
        return reader.schema(parquet_schema(schema))
    except (TypeError, ValueError, NotImplementedError):
        return reader.option("mergeSchema", "true")


def parquet_schema(schema: pa.Schema) -> Any:
    """The Spark schema Spark's Parquet reader infers for files of `schema`: every column
    nullable (a file may lack it), a timestamp without a time zone as TIMESTAMP_NTZ."""
    from pyspark.sql.pandas.types import from_arrow_schema

    nullable = pa.schema([f.with_nullable(True) for f in schema])
    return from_arrow_schema(nullable, prefer_timestamp_ntz=True)
