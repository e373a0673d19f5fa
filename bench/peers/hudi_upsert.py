"""The upsert benchmark's Hudi worker: Apache Hudi 1.2 copy-on-write on PySpark 3.5 (local[2],
s3a), run by `bench/upsert.py` with the interpreter of the environment `hudi_env.sh` creates:

    $HUDI_PEER_DIR/venv/bin/python -m bench.peers.hudi_upsert INPUTS_JSON OUT_JSON --jars DIR

Standard library and PySpark only (no pyarrow in that environment): inputs are read by Spark
from the local Parquet files and cached before a step's clock starts. Record key `id`, partition
path `part`, precombine (ordering) field `ts`; loads and the append use operation `insert`,
upserts `upsert`, the delete `delete` with the key rows. The index is Hudi's default for Spark
(SIMPLE: a join with the key columns of the affected partitions' base files) unless
`--hoodie hoodie.index.type=...` says otherwise.

The metadata table is off by default (`--hoodie hoodie.metadata.enable=true` turns it on): with
it on, Hudi's readers of the metadata table's log files leave s3a connections checked out, and
the pool runs dry within a dozen commits even at 1,000 connections ("Timeout waiting for
connection from pool"; seen here at 200k rows, and in ../shared/peers/hudi straight to MinIO).
The default index does not use the metadata table.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time
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


def main() -> None:
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
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.metadata.enable": "false",
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

    def frame(path: str) -> Any:
        df = spark.read.parquet("file://" + path).cache()
        df.count()  # read and cached before the clock starts
        return df

    def write(df: Any, operation: str) -> None:
        df.write.format("hudi").options(**opts).option(
            "hoodie.datasource.write.operation", operation
        ).mode("append").save(TABLE)

    with rec.step("load") as extra:
        # One commit per load batch; `seconds` leaves out reading each batch into the cache.
        spent = 0.0
        for step in inputs["loads"]:
            df = frame(step["path"])
            t0 = time.perf_counter()
            write(df, "insert")
            spent += time.perf_counter() - t0
            df.unpersist()
        extra["seconds"] = spent
    ops = {"upsert": "upsert", "delete": "delete", "append": "insert"}
    for step in inputs["steps"]:
        df = frame(step["path"])
        with rec.step(step["name"]):
            write(df, ops[step["kind"]])
        df.unpersist()
    with rec.step("count") as extra:
        extra["rows"] = spark.read.format("hudi").load(TABLE).count()
    spark.stop()


if __name__ == "__main__":
    main()
