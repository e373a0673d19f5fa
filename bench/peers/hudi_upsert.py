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

from bench.peers.hudi_worker import TABLE, start


def main() -> None:
    w = start("COPY_ON_WRITE")
    w.load()
    ops = {"upsert": "upsert", "delete": "delete", "append": "insert"}
    for step in w.inputs["steps"]:
        df = w.frame(step["path"])
        with w.rec.step(step["name"]):
            w.write(df, ops[step["kind"]])
        df.unpersist()
    with w.rec.step("count") as extra:
        extra["rows"] = w.spark.read.format("hudi").load(TABLE).count()
    w.spark.stop()


if __name__ == "__main__":
    main()
