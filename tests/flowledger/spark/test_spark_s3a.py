"""The spark tier's foundation: PySpark reads and writes MinIO through s3a, both ways."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import open_store
from storage.s3a import to_spark_path
from tests.support.servers import S3Endpoint

pytestmark = pytest.mark.spark


def test_spark_writes_parquet_that_flowledger_reads(spark: Any, minio: S3Endpoint) -> None:
    bucket = minio.new_bucket()
    uri = f"s3://{bucket}/spark/out"
    df = spark.range(0, 1000).withColumnRenamed("id", "n")
    df.write.mode("overwrite").parquet(to_spark_path(uri))
    store = open_store(uri, minio.settings())
    files = [o for o in store.list() if o.key.endswith(".parquet")]
    assert files
    total = sum(pq.read_table(io.BytesIO(store.get(o.key))).num_rows for o in files)
    assert total == 1000


def test_spark_reads_parquet_that_flowledger_wrote(spark: Any, minio: S3Endpoint) -> None:
    bucket = minio.new_bucket()
    store = open_store(f"s3://{bucket}/in", minio.settings())
    sink = io.BytesIO()
    pq.write_table(pa.table({"n": list(range(50)), "s": [str(i) for i in range(50)]}), sink)
    store.put_if_absent("part-0.parquet", sink.getvalue())
    rows = spark.read.parquet(to_spark_path(store.uri) + "/part-0.parquet").collect()
    assert sorted(r.n for r in rows) == list(range(50))
