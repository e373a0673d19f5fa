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
from tests.support.spark_cluster import driver_session, executors_of


def _pid(_: Any) -> int:
    return os.getpid()


def main() -> None:
    args = json.loads(sys.argv[1])
    spark = driver_session(args)
    try:
        seen = spark.sparkContext.parallelize(range(8), 8).map(_pid).distinct().collect()
        done = fs.compact(spark, args["table"])
        print(
            json.dumps(
                {
                    "compacted": done,
                    "python_workers": sorted(seen),
                    "driver_pid": os.getpid(),
                    "executors": executors_of(spark),
                }
            )
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
