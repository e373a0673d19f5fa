"""One sequence of keyed writes, applied through a Spark writer or the Python path, and a
comparison of the tables they leave (rows, and which step last wrote each row)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from storage import open_store
from timeline import Table
from timeline.keyed import COMMIT_TIME_COL, KeyedProperties

#: Record key id, partition p, value v, ordering field ts (merge mode event_time).
PROPS = {
    "recordKey": "id",
    "partitionBy": "p",
    "orderingField": "ts",
    "mergeMode": "event_time",
}
Row = tuple[int, int, int, int]

#: (operation, rows or keys). Covers: new file groups, updates in place, a duplicate key in
#: one batch (the higher ts wins), an older version that loses, a partition move (global
#: key), new keys filling small files, deletes (one of a missing key), and insert with
#: onDuplicate=drop.
STEPS: list[tuple[str, list[Any]]] = [
    ("upsert", [(i, i % 3, i, 1) for i in range(60)]),
    (
        "upsert",
        [
            (5, 2, 500, 3),
            (5, 2, 501, 2),  # same key, lower ts: loses to the row above
            (6, 0, 600, 0),  # older than the stored version: dropped
            (7, 2, 700, 2),  # was in p=1: moves to p=2
            (8, 2, 800, 2),
            (8, 2, 801, 2),  # same ts: the later row wins
            *[(i, i % 3, i * 10, 2) for i in range(60, 70)],
        ],
    ),
    ("delete", [1, 2, 999]),
    ("insert", [(3, 0, 3000, 5), *[(i, i % 3, i, 5) for i in range(70, 75)]]),
]


#: Keys unique per partition (Hudi's non-global index), the latest write wins: the same key
#: in two partitions is two records, duplicates of a batch keep the later row, and a delete
#: names the partition.
PARTITION_PROPS = {"recordKey": "id", "partitionBy": "p", "keyScope": "partition"}
PARTITION_STEPS: list[tuple[str, list[Any]]] = [
    ("upsert", [(i, i % 2, i, 0) for i in range(20)]),
    ("upsert", [(3, 1, 33, 0), (4, 1, 44, 0), (5, 1, 50, 0), (5, 1, 51, 0), (40, 0, 40, 0)]),
    ("delete", [(4, 0), (3, 0)]),  # (4, p=0) exists; (3, p=0) does not (3 is in p=1)
]


def spark_frame(spark: Any, rows: list[Row]) -> Any:
    return spark.createDataFrame(rows, "id long, p long, v long, ts long")


def apply_spark(
    spark: Any,
    uri: str,
    writer: str,
    steps: list[tuple[str, list[Any]]] = STEPS,
    props: dict[str, str] = PROPS,
) -> list[str]:
    """Apply `steps` through one Spark writer; the instant of each step."""
    import flowledger.spark as fs

    instants = []
    for op, rows in steps:
        opts = {**props, "operation": op}
        if op == "insert":
            opts["onDuplicate"] = "drop"
        if op == "delete" and isinstance(rows[0], tuple):
            df = spark.createDataFrame(rows, "id long, p long")
        elif op == "delete":
            df = spark.createDataFrame([(k,) for k in rows], "id long")
        else:
            df = spark_frame(spark, rows)
        if writer == "native":
            info = fs.write(df, uri, options=opts)
        else:
            info = fs.save(df, uri, options=opts)
        instants.append(info.instant_time)
    return instants


def apply_rows(table: Table, operation: str, data: pa.Table) -> None:
    """One step on the Python path: a delete takes the key, partition and ordering columns
    of `data`, an insert or upsert all of it."""
    if operation == "delete":
        table.delete(data.select(["id", "p", "ts"]))
    elif operation == "insert":
        table.insert(data)
    else:
        table.upsert(data)


def apply_python(
    root: Path,
    steps: list[tuple[str, list[Any]]] = STEPS,
    props: KeyedProperties | None = None,
) -> tuple[Table, list[str]]:
    """Apply `steps` with `Table.upsert/delete/insert`; the table and each step's instant."""
    if props is None:
        props = KeyedProperties.of(
            "id", ordering_field="ts", partition_by="p", merge_mode="event_time"
        )
    table = Table.create(open_store(str(root)), props)
    instants = []
    for op, rows in steps:
        if op == "delete" and isinstance(rows[0], tuple):
            keys = pa.table({"id": [r[0] for r in rows], "p": [r[1] for r in rows]})
            instant = table.delete(keys)
        elif op == "delete":
            instant = table.delete(list(rows))
        else:
            data = pa.table(
                {
                    n: pa.array([r[k] for r in rows], pa.int64())
                    for k, n in enumerate(["id", "p", "v", "ts"])
                }
            )
            if op == "upsert":
                instant = table.upsert(data)
            else:
                instant = table.insert(data, on_duplicate="drop")
        instants.append(instant.time)
    return table, instants


def comparable(
    table: Table, instants: list[str], as_of: str | None = None
) -> list[tuple[Any, ...]]:
    """The snapshot's rows, sorted, with each row's commit time as the step that wrote it."""
    step = {t: k for k, t in enumerate(instants)}
    data = table.read(as_of=as_of)
    rows = []
    for r in data.to_pylist():
        rows.append(
            (
                r["id"],
                r["p"],
                r["v"],
                r["ts"],
                r["_flowledger_record_key"],
                step[r[COMMIT_TIME_COL]],
            )
        )
    return sorted(rows)
