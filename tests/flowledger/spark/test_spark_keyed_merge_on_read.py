"""Spark's keyed writers and merge-on-read tables: upserts, inserts and deletes are delta
commits whose log blocks Spark's tasks write, reading as the Python path's; change reads
merge slices with their logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flowledger.spark as fs
from flowledger.spark.errors import SparkWriteError
from flowledger.spark.keyed_options import requested_properties
from storage import open_store
from tests.support.keyed_spark import apply_rows
from tests.support.servers import S3Endpoint
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.spark


def _values(table: Table) -> dict[int, int]:
    return {r["id"]: r["v"] for r in table.read().select(["id", "v"]).to_pylist()}


def _rows(table: Table) -> list[tuple[Any, ...]]:
    cols = ["id", "p", "v", "ts"]
    return sorted(tuple(r.values()) for r in table.read().select(cols).to_pylist())


#: (operation, rows as (id, p, v, ts)): upserts, a batch with a key twice (the higher ts
#: wins under event_time), inserts of new keys, deletes (by key and partition) and an
#: upsert that brings a deleted key back.
SEQUENCE: list[tuple[str, list[tuple[int, int, int, int]]]] = [
    ("upsert", [(i, i % 2, 0, 1) for i in range(40)]),
    ("upsert", [(1, 1, 1, 2), (2, 0, 1, 2), (3, 1, 1, 2), (100, 0, 1, 2), (101, 1, 1, 2)]),
    ("upsert", [(7, 1, 5, 9), (7, 1, 6, 3), (8, 0, 7, 0)]),  # 8: an older ts loses
    ("delete", [(2, 0, 0, 5), (3, 1, 0, 5), (555, 1, 0, 5)]),
    ("insert", [(200, 0, 2, 1), (201, 1, 2, 1)]),
    ("upsert", [(2, 0, 9, 9), (101, 1, 9, 9)]),
]


@pytest.mark.parametrize(
    ("writer", "scope", "backend"),
    [("datasource", "partition", "local"), ("native", "global", "minio")],
)
def test_spark_writes_delta_commits_that_read_as_the_python_path(
    registered: Any, minio: S3Endpoint, tmp_path: Path, writer: str, scope: str, backend: str
) -> None:
    """The same upserts, inserts and deletes into a partitioned merge-on-read table (event
    time merge mode) through Spark and through `Table.upsert/insert/delete`: every Spark
    write is a delta commit whose log blocks the executors wrote, both tables read the same
    rows after each write, and again after compacting either table (on the local filesystem,
    and on MinIO over s3a)."""
    spark = registered
    props = KeyedProperties.of(
        "id", ordering_field="ts", partition_by="p", merge_mode="event_time",
        key_scope=scope, table_type="merge_on_read",
    )  # fmt: skip
    settings = TableSettings(compaction_mode="off")
    py = Table.create(open_store(str(tmp_path / "py")), props, settings)
    uri, where = str(tmp_path / "spark"), None
    if backend == "minio":
        uri, where = f"s3a://{minio.new_bucket()}/t", minio.settings()
    Table.create(open_store(uri, where), props, settings)
    put = fs.save if writer == "datasource" else fs.write
    for operation, rows in SEQUENCE:
        data = pa.table({k: [r[i] for r in rows] for i, k in enumerate(["id", "p", "v", "ts"])})
        apply_rows(py, operation, data)
        df = spark.createDataFrame(rows, "id long, p long, v long, ts long")
        if operation == "delete":
            df = df.select("id", "p", "ts")
        info = put(df, uri, options={"operation": operation})
        assert info.action == "deltacommit"
        assert _rows(Table.open(open_store(uri, where), settings)) == _rows(py), operation
    sp = Table.open(open_store(uri, where), settings)
    writes = [i for i in sp.timeline().completed().instants if i.action != "commit"]
    assert {i.action for i in writes} == {"deltacommit"} and len(writes) == len(SEQUENCE)
    # Changes to stored keys are log blocks; the insert of new keys made new file groups.
    entries = [sp.entry(i.time) for i in writes[1:]]
    kinds = [op for op, _ in SEQUENCE[1:]]
    assert all(
        e.metadata.get("log_files") for e, op in zip(entries, kinds, strict=True) if op != "insert"
    )
    assert all(e.added for e, op in zip(entries, kinds, strict=True) if op == "insert")
    expected = _rows(py)
    assert expected[:2] == [(0, 0, 0, 1), (1, 1, 1, 2)] and (2, 0, 9, 9) in expected
    assert not any(r[0] in (3, 555) for r in expected)
    assert fs.compact(spark, uri) and py.maintenance.compact() is not None
    assert _rows(Table.open(open_store(uri, where), settings)) == _rows(py) == expected


def _image(image: Any) -> tuple[Any, ...] | None:
    if image is None:
        return None
    d = image.asDict() if hasattr(image, "asDict") else dict(image)
    return tuple(sorted(d.items()))


def test_change_reads_of_a_merge_on_read_table_see_its_logs(
    registered: Any, tmp_path: Path
) -> None:
    """The data source's incremental and CDC reads of a merge-on-read table merge each slice
    with its logs, as `Table.changes` does (base files alone held none of these changes)."""
    spark = registered
    uri = str(tmp_path / "mor")
    props = KeyedProperties.of("id", table_type="merge_on_read")
    table = Table.create(open_store(uri), props, TableSettings(compaction_mode="off"))
    first = table.upsert(pa.table({"id": list(range(10)), "v": [0] * 10})).time
    table.upsert(pa.table({"id": [1, 2, 30], "v": [1, 1, 1]}))  # updates and a new key
    table.delete([3])
    reader = spark.read.format("flowledger").option("changesSince", first)
    want = sorted((r["id"], r["v"]) for r in table.changes(first).to_pylist())
    assert want == [(1, 1), (2, 1), (30, 1)]
    assert sorted((r["id"], r["v"]) for r in reader.load(uri).collect()) == want
    cdc = reader.option("cdc", "true").load(uri).collect()
    got = sorted((r["op"], r["record_key"], _image(r["before"]), _image(r["after"])) for r in cdc)
    expected = sorted(
        (r["op"], r["record_key"], _image(r["before"]), _image(r["after"]))
        for r in table.changes(first, cdc=True).to_pylist()
    )
    assert got == expected
    assert sorted((g[0], g[1]) for g in got) == [("d", "3"), ("i", "30"), ("u", "1"), ("u", "2")]


def test_a_merge_on_read_table_asked_for_is_created_and_written_with_delta_commits(
    registered: Any, tmp_path: Path
) -> None:
    """Hudi's table-type option asking for merge-on-read creates a merge-on-read table on
    the first write (a delta commit); an unknown table type is refused with one line."""
    spark = registered
    df = spark.createDataFrame([(1, 1), (2, 2)], "id long, v long")
    uri = str(tmp_path / "new")
    opts = {"recordKey": "id", "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    info = fs.write(df, uri, options={**opts, "operation": "upsert"})
    table = Table.open(open_store(uri))
    assert table.properties is not None and table.properties.table_type == "merge_on_read"
    assert info.action == "deltacommit" and _values(table) == {1: 1, 2: 2}
    with pytest.raises(SparkWriteError, match="tableType") as caught:
        requested_properties({"recordKey": "id", "tableType": "mor_please"})
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_a_native_overwrite_of_a_keyed_table_is_refused_before_writing(
    registered: Any, tmp_path: Path, table_type: str
) -> None:
    """Spark's Parquet files carry no record keys: an overwrite of a keyed table through the
    native writer is refused with one line before the job writes anything (the commit used
    to refuse it after every file was written)."""
    spark = registered
    uri = str(tmp_path / "t")
    props = KeyedProperties.of("id", table_type=table_type)
    table = Table.create(open_store(uri), props, TableSettings(compaction_mode="off"))
    table.upsert(pa.table({"id": [1, 2], "v": [0, 0]}))
    instants = table.timeline().instants
    objects = {o.key for o in table.store.list("")}
    df = spark.createDataFrame([(4, 1)], "id long, v long")
    with pytest.raises(SparkWriteError, match="keyed table") as caught:
        fs.write(df, uri, mode="overwrite")
    assert "\n" not in str(caught.value) and "mode='overwrite'" in str(caught.value)
    after = Table.open(open_store(uri))
    assert after.timeline().instants == instants
    assert {o.key for o in after.store.list("")} == objects
    assert _values(after) == {1: 0, 2: 0}
