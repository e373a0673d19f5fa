"""A Spark driver for a standalone cluster: applies the keyed steps of `keyed_spark` through
each Spark writer and prints one JSON line (each writer's instants, the executors seen).

    python -m tests.support.keyed_cluster_driver '{"master": ..., "tables": {...}, ...}'

S3 and the s3a jars reach the executors only through the session's conf (`spark.hadoop.*`,
`spark.jars`), as for a user's application.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tests.support.keyed_spark import apply_spark
from tests.support.spark_cluster import driver_session, executors_of


def _pid(_: Any) -> tuple[int, str]:
    import socket

    return os.getpid(), socket.gethostname()


def main() -> None:
    args = json.loads(sys.argv[1])
    spark = driver_session(args)
    try:
        seen = spark.sparkContext.parallelize(range(8), 8).map(_pid).distinct().collect()
        out = {w: apply_spark(spark, uri, w) for w, uri in args["tables"].items()}
        print(
            json.dumps(
                {
                    "instants": out,
                    "python_workers": sorted({p for p, _ in seen}),
                    "driver_pid": os.getpid(),
                    "executors": executors_of(spark),
                    "master": spark.sparkContext.master,
                }
            )
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
