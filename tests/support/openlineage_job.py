"""A small Spark job run with the OpenLineage listener (its own process: the listener must be
set when the session starts). argv: listener jar, events file, input CSV dir, output dir."""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main(jar: str, events: str, source: str, target: str) -> None:
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("flowledger-openlineage-test")
        .config("spark.jars", jar)
        .config("spark.extraListeners", "io.openlineage.spark.agent.OpenLineageSparkListener")
        .config("spark.openlineage.transport.type", "file")
        .config("spark.openlineage.transport.location", events)
        .config("spark.openlineage.namespace", "flowledger-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    try:
        df = spark.read.option("header", True).csv(source)
        df.where("qty > 1").write.mode("overwrite").parquet(target)
    finally:
        spark.stop()  # flushes the listener's last events


if __name__ == "__main__":
    main(*sys.argv[1:5])
