"""A Spark driver for a standalone cluster: compacts one merge-on-read table with
`flowledger.spark.compact` and prints one JSON line (the compactions completed, the
executors seen).

    python -m tests.support.compaction_cluster_driver '{"master": ..., "table": ..., ...}'

S3 and the s3a jars reach the executors only through the session's conf (`spark.hadoop.*`,
`spark.jars`), as for a user's application.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import flowledger.spark as fs


def _pid(_: Any) -> int:
    return os.getpid()


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
        done = fs.compact(spark, args["table"])
        print(
            json.dumps(
                {
                    "compacted": done,
                    "python_workers": sorted(seen),
                    "driver_pid": os.getpid(),
                    "executors": executors,
                }
            )
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
