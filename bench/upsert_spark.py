"""The upsert benchmark's flowledger Spark path, run in its own process by `bench/upsert.py`:

    python -m bench.upsert_spark INPUTS_JSON OUT_JSON WORKDIR

The same keyed copy-on-write table as the Python path (record key `id`, ordering field `ts`,
partition `part`; key scope from FLOWLEDGER_KEY_SCOPE, the table default when unset), written
by Spark in local mode over s3a to the orchestrator's MinIO (through its counting proxy, from
the standard AWS variables, as `flowledger.spark.session` sets s3a up):
`flowledger.spark.save(df, uri, options={"operation": ...})` — planned and committed on the
driver, the one-process writer's steps in Spark tasks (keyed_shards.py) — or, with
FLOWLEDGER_SPARK_WRITER=native, `flowledger.spark.write`. The inserts (the load's commits and
the append) are given the plain scan of their local Parquet file, as a job reads its input
(the writer may read the file itself: docs/spark.md, "Plain Parquet inputs read directly"),
read within the clock as the Python path reads its load as a stream; the upserts' and the
delete's inputs are read into a cached DataFrame before their clock starts, as the Hudi
worker does. Peak memory is the Python driver's and the driver JVM's.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.upsert_data import Inputs
from bench.upsert_probe import Recorder

URI = "s3a://flowledger-spark/t"
WRITERS = ("save", "native")


def session(workdir: Path, driver_memory: str = "3g") -> Any:
    import flowledger.spark as fs

    spark = fs.session(
        repo=str(workdir / "flowledger-spark-repo"),
        master="local[2]",
        app_name="bench-upsert-flowledger-spark",
        conf={
            "spark.driver.memory": driver_memory,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> None:
    inputs_json, out_json, workdir = sys.argv[1:] if argv is None else argv
    rec = Recorder("flowledger-spark", Path(out_json))
    writer = os.environ.get("FLOWLEDGER_SPARK_WRITER", "save")
    if writer not in WRITERS:
        rec.result["unavailable"] = f"FLOWLEDGER_SPARK_WRITER must be one of {WRITERS}"
        rec.save()
        return
    try:
        import flowledger.spark as fs

        spark = session(Path(workdir))
    except Exception as exc:  # no pyspark, no Java, no s3a jars
        rec.result["unavailable"] = f"Spark unavailable: {type(exc).__name__}: {exc}"[:400]
        rec.save()
        return
    rec.jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    inputs = Inputs.load(Path(inputs_json))
    keyed = {"recordKey": "id", "orderingField": "ts", "partitionBy": "part"}
    if scope := os.environ.get("FLOWLEDGER_KEY_SCOPE"):
        keyed["keyScope"] = scope
    rec.result["info"] = {
        "spark": spark.version,
        "writer": "flowledger.spark.save" if writer == "save" else "flowledger.spark.write",
    }

    def frame(path: str, cached: bool = True) -> Any:
        df = spark.read.parquet("file://" + path)
        if cached:
            df = df.cache()
            df.count()  # read and cached before the clock starts
        return df

    def write(df: Any, operation: str) -> str:
        opts = {**keyed, "operation": operation}
        put = fs.save if writer == "save" else fs.write
        return str(put(df, URI, options=opts).instant_time)

    def describe(instant: str) -> dict[str, Any]:
        """What the commit recorded about the step (read after its clock stopped)."""
        from flowledger.spark.conf import conf_of, store_settings
        from storage import open_store
        from timeline import Table

        store = open_store("s3://flowledger-spark/t", store_settings(conf_of(spark)))
        keyed_meta = Table.open(store).entry(instant).metadata.get("keyed") or {}
        return {k: v for k, v in keyed_meta.items() if k != "properties"}

    with rec.step("load") as extra:
        # One commit per load batch; `seconds` counts each scan's read, as the Python path's.
        spent = 0.0
        for step in inputs.loads:
            df = frame(step.path, cached=False)
            t0 = time.perf_counter()
            write(df, "insert")
            spent += time.perf_counter() - t0
            df.unpersist()
        extra["seconds"] = spent
    ops = {"upsert": "upsert", "delete": "delete", "append": "insert"}
    for step in inputs.steps:
        df = frame(step.path, cached=step.kind != "append")
        done: dict[str, str] = {}
        with rec.step(step.name) as extra:
            done["instant"] = write(df, ops[step.kind])
        df.unpersist()
        if "instant" in done:
            rec.annotate(describe(done["instant"]))
    with rec.step("count") as extra:
        extra["rows"] = int(fs.read(spark, URI).count())
    spark.stop()


if __name__ == "__main__":
    main()
