"""What the benchmarks' Hudi workers share (bench/peers/hudi_upsert.py, hudi_mor.py): the
Spark 3.5 session with Hudi and s3a against the benchmark's MinIO (through its counting proxy,
AWS_ENDPOINT_URL), the worker's arguments, the table options every table type starts from, and
the load step. Standard library and PySpark only: the Hudi environment has no pyarrow.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.upsert_probe import Recorder

TABLE = "s3a://hudi/t"


def session(jars: str, driver_memory: str, extra: list[str]) -> Any:
    from pyspark.sql import SparkSession

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    b = (
        SparkSession.builder.master("local[2]")
        .appName("bench-upsert-hudi")
        .config("spark.jars", ",".join(sorted(glob.glob(os.path.join(jars, "*.jar")))))
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog"
        )
        .config("spark.hadoop.fs.s3a.endpoint", endpoint)
        .config("spark.hadoop.fs.s3a.path.style.access", "true")
        .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
        .config("spark.hadoop.fs.s3a.endpoint.region", os.environ.get("AWS_REGION", "us-east-1"))
        .config("spark.hadoop.fs.s3a.access.key", os.environ["AWS_ACCESS_KEY_ID"])
        .config("spark.hadoop.fs.s3a.secret.key", os.environ["AWS_SECRET_ACCESS_KEY"])
        .config(
            "spark.hadoop.fs.s3a.aws.credentials.provider",
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        )
        .config("spark.hadoop.fs.s3a.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")
        # The metadata table's readers keep s3a connections open: the default pool of 96 runs
        # dry after a few commits (see ../shared/peers/hudi/results.md).
        .config("spark.hadoop.fs.s3a.connection.maximum", "1000")
    )
    for kv in extra:
        k, _, v = kv.partition("=")
        b = b.config(k, v)
    return b.getOrCreate()


@dataclass
class Worker:
    """A started Hudi worker: its recorder, inputs, Spark session and write options."""

    rec: Recorder
    inputs: dict[str, Any]
    spark: Any
    opts: dict[str, str]

    def frame(self, path: str) -> Any:
        df = self.spark.read.parquet("file://" + path).cache()
        df.count()  # read and cached before the clock starts
        return df

    def write(self, df: Any, operation: str) -> None:
        df.write.format("hudi").options(**self.opts).option(
            "hoodie.datasource.write.operation", operation
        ).mode("append").save(TABLE)

    def load(self) -> None:
        """The `load` step: one `insert` commit per load batch; `seconds` leaves out reading
        each batch into the cache."""
        with self.rec.step("load") as extra:
            spent = 0.0
            for step in self.inputs["loads"]:
                df = self.frame(step["path"])
                t0 = time.perf_counter()
                self.write(df, "insert")
                spent += time.perf_counter() - t0
                df.unpersist()
            extra["seconds"] = spent


def start(table_type: str, defaults: dict[str, str] | None = None) -> Worker:
    """Parse the worker's arguments, start Spark, and state the table options (record key
    `id`, partition `part`, precombine `ts`, metadata table off, then `defaults`, then the
    caller's `--hoodie` options)."""
    p = argparse.ArgumentParser()
    p.add_argument("inputs")
    p.add_argument("out")
    p.add_argument("--jars", required=True)
    p.add_argument("--driver-memory", default="3g")
    p.add_argument("--hoodie", action="append", default=[], help="extra Hudi option k=v")
    p.add_argument("--spark-conf", action="append", default=[], help="extra Spark conf k=v")
    a = p.parse_args()

    rec = Recorder("hudi", Path(a.out))
    inputs = json.loads(Path(a.inputs).read_text())
    spark = session(a.jars, a.driver_memory, a.spark_conf)
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._jvm
    rec.jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    opts = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.enable": "false",
        **(defaults or {}),
    }
    for kv in a.hoodie:
        k, _, v = kv.partition("=")
        opts[k] = v
    rec.result["info"] = {
        "hudi": str(jvm.org.apache.hudi.HoodieVersion.get()),
        "spark": spark.version,
        "index": opts.get("hoodie.index.type", "default (SIMPLE on Spark)"),
        "metadata table": opts["hoodie.metadata.enable"],
    }
    rec.save()
    return Worker(rec, inputs, spark, opts)
