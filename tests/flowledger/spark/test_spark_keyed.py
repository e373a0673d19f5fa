"""Keyed writes and change reads on Spark: upsert, insert and delete through both Spark
writers (native and data source) leave the same table as the Python path, and the data
source's incremental and CDC reads return what `Table.changes` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flowledger.spark as fs
from flowledger.spark.errors import SparkWriteError
from storage import open_store
from tests.support.keyed_spark import (
    PARTITION_PROPS,
    PARTITION_STEPS,
    STEPS,
    apply_python,
    apply_spark,
    comparable,
    spark_frame,
)
from timeline import DuplicateKeys, Table
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("writer", ["native", "datasource"])
def test_keyed_writes_equal_the_python_path(
    registered: Any, where: tuple[str, Any], writer: str, tmp_path: Path
) -> None:
    spark, (uri, settings) = registered, where
    instants = apply_spark(spark, uri, writer)
    table = Table.open(open_store(uri, settings))
    reference = apply_python(tmp_path / "python")
    assert comparable(table, instants) == comparable(reference[0], reference[1])
    # Every step's snapshot, not only the last (time travel through the Spark commits).
    for k in range(len(STEPS)):
        got = comparable(table, instants, as_of=instants[k])
        assert got == comparable(reference[0], reference[1], as_of=reference[1][k])
    stats = table.entry(instants[1]).metadata["write_stats"]
    assert sum(s["updates"] for s in stats) >= 1 and sum(s["inserts"] for s in stats) >= 1
    # The updates went into new slices of existing file groups, not new groups.
    assert any(s["prev_commit"] for s in stats)
    # New keys were placed as the Python path places them: into the groups the write
    # rewrites anyway first, then small files, then new groups.
    for mine, theirs in zip(instants, reference[1], strict=True):
        assert placement(table, mine) == placement(reference[0], theirs)


def placement(table: Table, instant: str) -> list[tuple[Any, ...]]:
    """Per file the commit wrote: partition, whether it is a new file group, and its counts."""
    return sorted(
        (s["partition"], s["prev_commit"] is None, s["inserts"], s["updates"], s["deletes"])
        for s in table.entry(instant).metadata.get("write_stats", [])
    )


@pytest.mark.parametrize("writer", ["native", "datasource"])
def test_partition_scoped_keys_and_commit_time_equal_the_python_path(
    registered: Any, writer: str, tmp_path: Path
) -> None:
    spark = registered
    uri = str(tmp_path / "spark")
    instants = apply_spark(spark, uri, writer, PARTITION_STEPS, PARTITION_PROPS)
    props = KeyedProperties.of("id", partition_by="p", key_scope="partition")
    reference = apply_python(tmp_path / "python", PARTITION_STEPS, props)
    got = comparable(Table.open(open_store(uri)), instants)
    assert got == comparable(reference[0], reference[1])
    assert [r[:3] for r in got if r[0] == 4] == [(4, 1, 44)]  # (4, p=0) deleted, p=1 kept


def test_change_reads_run_on_spark(registered: Any, where: tuple[str, Any]) -> None:
    spark, (uri, settings) = registered, where
    instants = apply_spark(spark, uri, "native")
    table = Table.open(open_store(uri, settings))
    reader = spark.read.format("flowledger").option("changesSince", instants[0])
    inc = reader.load(uri)
    want = table.changes(instants[0])
    key = "_flowledger_record_key"
    got_rows = sorted(inc.toPandas().to_dict("records"), key=lambda r: r[key])
    want_rows = sorted(want.to_pylist(), key=lambda r: r[key])
    assert got_rows == want_rows and want_rows
    cdc = reader.option("cdc", "true").load(uri)
    got = sorted(
        (r["instant"], r["op"], r["record_key"], _row(r["before"]), _row(r["after"]))
        for r in cdc.collect()
    )
    expected = sorted(
        (r["instant"], r["op"], r["record_key"], _row(r["before"]), _row(r["after"]))
        for r in table.changes(instants[0], cdc=True).to_pylist()
    )
    assert got == expected and {g[1] for g in got} == {"i", "u", "d"}
    # Hudi's option names work too.
    hudi = spark.read.format("flowledger").option(
        "hoodie.datasource.read.begin.instanttime", instants[0]
    )
    assert hudi.load(uri).count() == want.num_rows


def _row(image: Any) -> tuple[Any, ...] | None:
    if image is None:
        return None
    d = image.asDict() if hasattr(image, "asDict") else dict(image)
    return tuple(sorted(d.items()))


def test_insert_of_stored_keys_fails_and_commits_nothing(registered: Any, tmp_path: Path) -> None:
    spark = registered
    uri = str(tmp_path / "t")
    opts = {"operation": "insert", "recordKey": "id", "partitionBy": "p"}
    fs.write(spark_frame(spark, [(1, 0, 1, 1), (2, 0, 2, 1)]), uri, options=opts)
    table = Table.open(open_store(uri))
    before = table.snapshot().instant_time
    with pytest.raises(DuplicateKeys):
        fs.write(spark_frame(spark, [(2, 0, 9, 2), (3, 0, 3, 2)]), uri, options=opts)
    assert Table.open(open_store(uri)).snapshot().instant_time == before


def test_bare_format_keyed_write_is_refused_with_the_way_to_do_it(
    registered: Any, tmp_path: Path
) -> None:
    spark = registered
    uri = str(tmp_path / "t")
    Table.create(open_store(uri), KeyedProperties.of("id"))
    df = spark_frame(spark, [(1, 0, 1, 1)])
    w = df.write.format("flowledger").mode("append")
    with pytest.raises(Exception, match=r"flowledger\.spark\.save"):
        w.option("operation", "upsert").option("recordKey", "id").save(uri)
    with pytest.raises(Exception, match="is a keyed table"):
        # A plain append would escape every key lookup.
        df.write.format("flowledger").mode("append").save(uri)


def test_keyed_options_follow_hudi_names() -> None:
    from flowledger.spark.keyed_options import keyed_options, requested_properties

    opts = {
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.recordkey.field": "a,b",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "day",
        "hoodie.write.record.merge.mode": "EVENT_TIME_ORDERING",
        "hoodie.index.type": "BLOOM",
    }
    kopts = keyed_options(opts)
    assert kopts is not None and kopts.operation == "upsert"
    assert requested_properties(opts) == KeyedProperties.of(
        ["a", "b"], ordering_field="ts", partition_by="day", merge_mode="event_time",
        key_scope="partition",
    )  # fmt: skip
    with pytest.raises(SparkWriteError):
        keyed_options({"operation": "merge"})
    assert pa is not None


def test_merge_on_read_snapshot_is_merged_on_spark(registered: Any, where: tuple[str, Any]) -> None:
    """Changes still in log files are seen by Spark (each slice merged by an executor), not
    only the base files; time travel to before them shows the older rows."""
    spark, (uri, settings) = registered, where
    t = Table.create(
        open_store(uri, settings), KeyedProperties.of("id", table_type="merge_on_read")
    )
    first = t.upsert(pa.table({"id": [1, 2, 3], "delay": [5, 7, 9]}))
    t.upsert(pa.table({"id": [2], "delay": [70]}))  # a delta commit: a log block
    t.delete([3])
    assert t.snapshot().merge_on_read_slices() is not None  # the changes are still in logs
    want = sorted(t.read().select(["id", "delay"]).to_pylist(), key=lambda r: r["id"])
    assert want == [{"id": 1, "delay": 5}, {"id": 2, "delay": 70}]
    for df in (spark.read.format("flowledger").load(uri), fs.read(spark, uri)):
        got = sorted(
            ({"id": r["id"], "delay": r["delay"]} for r in df.select("id", "delay").collect()),
            key=lambda r: r["id"],
        )
        assert got == want
    old = fs.read(spark, uri, as_of=first.time).select("id", "delay").collect()
    assert sorted((r["id"], r["delay"]) for r in old) == [(1, 5), (2, 7), (3, 9)]


@pytest.mark.parametrize("writer", ["native", "datasource"])
def test_partition_scoped_keys_in_look_alike_partitions_stay_two_records(
    registered: Any, writer: str, tmp_path: Path
) -> None:
    """('x y', 1) and ('x_y', 1) are two records; an upsert of one leaves the other."""
    spark, uri = registered, str(tmp_path / "t")
    opts = {**PARTITION_PROPS, "operation": "upsert"}
    write = fs.write if writer == "native" else fs.save
    schema = "id long, p string, v long"
    write(spark.createDataFrame([(1, "x y", 0), (1, "x/y", 0)], schema), uri, options=opts)
    write(spark.createDataFrame([(1, "x_y", 2)], schema), uri, options=opts)
    table = Table.open(open_store(uri))
    got = sorted((r["p"], r["v"]) for r in table.read().select(["p", "v"]).to_pylist())
    assert got == [("x y", 0), ("x/y", 0), ("x_y", 2)]
    assert {f.partition for f in table.snapshot().files} == {"p=x%20y", "p=x%2Fy", "p=x_y"}


@pytest.mark.parametrize("writer", ["native", "datasource"])
def test_look_alike_composite_keys_stay_two_records_on_spark(
    registered: Any, tmp_path: Path, writer: str
) -> None:
    """Keys whose unescaped complex-key texts were equal (`a:x,b:y,b:z`) are two records;
    a delete of one by key, with its numbers given as another type, leaves the other."""
    spark, uri = registered, str(tmp_path / "t")
    put = fs.write if writer == "native" else fs.save
    opts = {"recordKey": "a,b,n"}
    rows = [("x,b:y", "z", 1, 1), ("x", "y,b:z", 1, 2)]
    both = spark.createDataFrame(rows, "a string, b string, n long, v long")
    put(both, uri, options={**opts, "operation": "upsert"})
    table = Table.open(open_store(uri))
    assert sorted((r["a"], r["b"], r["v"]) for r in table.read().to_pylist()) == [
        ("x", "y,b:z", 2),
        ("x,b:y", "z", 1),
    ]
    gone = spark.createDataFrame([("x,b:y", "z", 1)], "a string, b string, n int")
    put(gone, uri, options={**opts, "operation": "delete"})
    rows_left = Table.open(open_store(uri)).read().to_pylist()
    assert [(r["a"], r["b"]) for r in rows_left] == [("x", "y,b:z")]
