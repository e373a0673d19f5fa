"""The merge-on-read benchmark's Hudi worker: Apache Hudi 1.2 MERGE_ON_READ on PySpark 3.5
(local[2], s3a), run by `bench/merge_on_read.py` with the interpreter of the environment
`hudi_env.sh` creates:

    $HUDI_PEER_DIR/venv/bin/python -m bench.peers.hudi_mor INPUTS_JSON OUT_JSON --jars DIR

The same steps as bench/mor_systems.py's `flowledger-mor`, on Hudi's defaults for a
merge-on-read table written by Spark (index SIMPLE, log blocks as Hudi writes them) except:
inline compaction off (`hoodie.compact.inline=false`; Spark's batch writer turns it on for
merge-on-read tables and would compact after 5 delta commits) until the explicit, timed
compaction (`CALL run_compaction(op => 'scheduleAndExecute')`), and the metadata table off
as in bench/peers/hudi_upsert.py (why: its docstring; what both workers share:
hudi_worker.py). Loads use operation `insert`, the delta commits `upsert`. A read is
`spark.read.format("hudi")` with `hoodie.datasource.query.type` `snapshot` or
`read_optimized`, aggregated in one pass to the row count, the sum of `qty` and the max of an
xxhash64 over every data column (which makes Spark read every column).
"""

from __future__ import annotations

from typing import Any

from bench.peers.hudi_worker import TABLE, start


def timeline_counts(spark: Any) -> dict[str, int]:
    """Completed instants by action in the active timeline (Hudi 1.x: .hoodie/timeline)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    counts: dict[str, int] = {}
    for folder in (TABLE + "/.hoodie/timeline", TABLE + "/.hoodie"):
        path = jvm.org.apache.hadoop.fs.Path(folder)
        fs = path.getFileSystem(conf)
        if not fs.exists(path):
            continue
        for status in fs.listStatus(path):
            name = status.getPath().getName()
            action = name.rsplit(".", 1)[-1] if "." in name else ""
            if action in ("commit", "deltacommit", "requested", "inflight") or name.endswith(
                ".compaction.requested"
            ):
                key = "compaction.requested" if name.endswith(".compaction.requested") else action
                counts[key] = counts.get(key, 0) + 1
        if counts:
            break
    return counts


def main() -> None:
    from pyspark.sql import functions as F

    w = start("MERGE_ON_READ", {"hoodie.compact.inline": "false"})
    spark, rec = w.spark, w.rec
    columns = w.inputs["columns"]

    def read(query_type: str) -> dict[str, Any]:
        df = spark.read.format("hudi").option("hoodie.datasource.query.type", query_type)
        row = (
            df.load(TABLE)
            .agg(
                F.count(F.lit(1)).alias("rows"),
                F.sum("qty").alias("qty_sum"),
                F.max(F.xxhash64(*columns)).alias("hash"),
            )
            .collect()[0]
        )
        return {"rows": int(row["rows"]), "qty_sum": int(row["qty_sum"] or 0), "hash": row["hash"]}

    w.load()
    for i, step in enumerate(w.inputs["upserts"], start=1):
        df = w.frame(step["path"])
        with rec.step(step["name"]):
            w.write(df, "upsert")
        df.unpersist()
        if i in w.inputs["reads_at"]:
            with rec.step(f"snapshot_{i}") as extra:
                extra.update(read("snapshot"))
            with rec.step(f"read_optimized_{i}") as extra:
                extra.update(read("read_optimized"))
    # Off the clock: the timeline shows whether anything compacted before the explicit run.
    rec.result["info"]["instants before compaction"] = timeline_counts(spark)
    rec.save()
    with rec.step("compaction") as extra:
        out = spark.sql(f"CALL run_compaction(op => 'scheduleAndExecute', path => '{TABLE}')")
        extra["plans"] = [r.asDict() for r in out.collect()]
    rec.annotate(compaction_stats(spark))
    with rec.step("snapshot_compacted") as extra:
        extra.update(read("snapshot"))
    spark.stop()


def compaction_stats(spark: Any) -> dict[str, Any]:
    """Rows and bytes the newest commit (the compaction) wrote, from Hudi's `show_commits`
    (which takes a catalog table, so the path is registered as one first)."""
    try:
        spark.sql(f"CREATE TABLE IF NOT EXISTS bench_t USING hudi LOCATION '{TABLE}'")
        rows = spark.sql("CALL show_commits(table => 'bench_t', limit => 1)").collect()
    except Exception as exc:  # the figures are extras: the step's timing stands without them
        return {"stats_error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    if not rows:
        return {}
    r = rows[0].asDict()
    if r.get("action") != "commit":  # a compaction completes as a commit; none happened
        return {"file_groups": 0, "rows": 0, "bytes_written": 0, "newest": r.get("action")}
    return {
        "compaction_instant": r.get("commit_time"),
        "action": r.get("action"),
        "rows": r.get("total_records_written"),
        "bytes_written": r.get("total_bytes_written"),
        "file_groups": r.get("total_files_updated"),
    }


if __name__ == "__main__":
    main()
