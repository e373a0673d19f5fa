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

import flowledger.spark as fs
from tests.support.keyed_spark import apply_spark


def _pid(_: Any) -> tuple[int, str]:
    import socket

    return os.getpid(), socket.gethostname()


def main() -> None:
    args = json.loads(sys.argv[1])
    conf = {
        "spark.jars": ",".join(args["jars"]),
        **args["s3a"],
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
    }
    spark = fs.session(repo=args["repo"], master=args["master"], conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        seen = spark.sparkContext.parallelize(range(8), 8).map(_pid).distinct().collect()
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        out = {w: apply_spark(spark, uri, w) for w, uri in args["tables"].items()}
        print(
            json.dumps(
                {
                    "instants": out,
                    "python_workers": sorted({p for p, _ in seen}),
                    "driver_pid": os.getpid(),
                    "executors": executors,
                    "master": spark.sparkContext.master,
                }
            )
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
