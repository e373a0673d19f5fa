"""A Spark driver in a process of its own, for the tests that kill it or run two at once.

    python -m tests.support.spark_driver '{"name": ..., "repo": ..., "steps": [...]}'

Each step writes `spark.range(start, end)` through `flowledger.spark.write`. With `barrier`
(a directory) and `parties`, the step's commit waits until every party reached its own commit,
so concurrent writers really overlap. Prints one JSON line of results.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import flowledger.spark as fs
from timeline import CommitConflict, Instant
from timeline.txn import Transaction


def _with_barrier(name: str, barrier: Path, parties: int) -> None:
    commit = Transaction.commit

    def waiting(self: Transaction, extra: Any = None) -> Instant:
        barrier.mkdir(parents=True, exist_ok=True)
        (barrier / name).write_text(self.instant_time)
        deadline = time.monotonic() + 300
        while len(list(barrier.iterdir())) < parties and time.monotonic() < deadline:
            time.sleep(0.2)
        Transaction.commit = commit  # type: ignore[method-assign]
        return commit(self, extra)

    Transaction.commit = waiting  # type: ignore[method-assign]


def main() -> None:
    args = json.loads(sys.argv[1])
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}
    spark = fs.session(repo=args.get("repo"), master="local[1]", app_name=args["name"], conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    results: list[dict[str, Any]] = []
    for step in args["steps"]:
        if step.get("barrier"):
            _with_barrier(args["name"], Path(step["barrier"]), int(step["parties"]))
        df = spark.range(step["start"], step["end"]).selectExpr("id", "id % 3 as p")
        try:
            info = fs.write(df, step["uri"], step["mode"])
            results.append({"instant": info.instant_time, "rows": info.rows})
        except CommitConflict as exc:
            results.append({"conflict": str(exc), "winner": exc.winner})
    print(json.dumps(results), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
