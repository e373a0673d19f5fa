"""A keyed write of six rows through `flowledger.spark.save` at the defaults a user gets:

    python -m bench.spark_small_write [--rounds N]

Three sessions on `local[2]`, each in its own process so none inherits another's settings:
`flowledger.spark.session()` as it comes, a plain `SparkSession` with only the data source
registered (Spark's defaults: 200 shuffle partitions), and the baseline: the first with the
keyed write's shuffle left at the session's 200 partitions and adaptive execution off, so
nothing sizes the shuffle to the input (what a keyed write cost before it was sized;
copy-on-write only, merge-on-read writes were refused then). Each writes a six-row
upsert into a keyed copy-on-write table and a merge-on-read table on the local filesystem,
after one warm-up write (the first write pays the JVM's and the Python workers' start). The
table prints seconds per write and the Spark tasks each write ran (its shuffle's width), with
the ratio to the baseline and to the goal of 15 s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_SECONDS = 15.0
#: "unsized": `flowledger.spark.session()` with the keyed write's shuffle left at the
#: session's width and adaptive execution (which coalesces small shuffles) off: the baseline,
#: a shuffle nothing sizes to the input.
SESSIONS = ("unsized", "flowledger", "plain")
TABLE_TYPES = ("copy_on_write", "merge_on_read")


def _session(kind: str, repo: Path) -> Any:
    import flowledger.spark as fs

    if kind == "unsized":
        from flowledger.spark import shuffle

        shuffle.shuffle_width = lambda df, configured: configured
    if kind in ("flowledger", "unsized"):
        conf = {"spark.ui.enabled": "false"}
        if kind == "unsized":
            conf["spark.sql.adaptive.enabled"] = "false"
        return fs.session(repo=str(repo), master="local[2]", conf=conf)
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # as a venv's user has it
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    spark.conf.set("spark.flowledger.repo", str(repo))
    fs.register(spark)
    return spark


class _Tasks:
    """Spark tasks finished while it is open (a status-tracker count, no listener)."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext

    def count(self) -> int:
        tracker = self.sc.statusTracker()
        total = 0
        for job in tracker.getJobIdsForGroup(None):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                s = tracker.getStageInfo(stage)
                total += s.numCompletedTasks if s else 0
        return total


def run_one(kind: str, workdir: Path) -> dict[str, Any]:
    """One session's writes (in this process): seconds and tasks per table type."""
    import flowledger.spark as fs

    spark = _session(kind, workdir / "repo")
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {"shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions")}
    rows = [(i, i * 10, f"r{i}") for i in range(6)]
    for table_type in TABLE_TYPES[:1] if kind == "unsized" else TABLE_TYPES:
        uri = str(workdir / table_type)
        opts = {"operation": "upsert", "recordKey": "id", "tableType": table_type}
        try:
            fs.save(spark.createDataFrame(rows, "id long, v long, s string"), uri, options=opts)
        except Exception as exc:  # a writer that refuses this table type
            out[table_type] = {"refused": str(exc).splitlines()[0][:80]}
            continue
        df = spark.createDataFrame([(i, v + 1, s) for i, v, s in rows], "id long, v long, s string")
        tasks = _Tasks(spark)
        before = tasks.count()
        t0 = time.perf_counter()
        fs.save(df, uri, options=opts)
        out[table_type] = {"seconds": time.perf_counter() - t0, "tasks": tasks.count() - before}
    spark.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", choices=SESSIONS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(run_one(args.one, Path(d))))
        return
    results = {}
    for kind in SESSIONS:
        done = subprocess.run(
            [sys.executable, "-m", "bench.spark_small_write", "--one", kind],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        results[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    base = results["unsized"]["copy_on_write"]
    print("| session | shuffle partitions | table type | seconds | vs baseline | vs goal 15 s "
          "| Spark tasks (vs baseline) |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|")
    for kind, r in results.items():
        for table_type in TABLE_TYPES:
            m = r.get(table_type)
            if m is None:
                continue
            if "refused" in m:
                print(f"| {kind} | {r['shuffle_partitions']} | {table_type} | refused | | | |")
                continue
            print(
                f"| {kind} | {r['shuffle_partitions']} | {table_type} | {m['seconds']:.1f} "
                f"| {m['seconds'] / base['seconds']:.2f}x | {m['seconds'] / GOAL_SECONDS:.2f}x "
                f"| {m['tasks']} ({m['tasks'] / base['tasks']:.3f}x) |"
            )


if __name__ == "__main__":
    main()
