"""Spark's keyed writers and merge-on-read tables: a keyed write rewrites each touched file
group from its base file alone, so it refuses a merge-on-read table (whose file groups keep
committed changes in logs) before anything is begun, and the table keeps every change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flowledger.spark as fs
from flowledger.errors import answer_for
from flowledger.spark.errors import SparkWriteError
from flowledger.spark.keyed_options import requested_properties
from storage import ErrorKind, kind_of, open_store
from timeline import Table, TableSettings, WriterNotSupported
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.spark


def _values(table: Table) -> dict[int, int]:
    return {r["id"]: r["v"] for r in table.read().select(["id", "v"]).to_pylist()}


@pytest.mark.parametrize("writer", ["datasource", "native"])
def test_an_upsert_into_a_merge_on_read_table_is_refused(
    registered: Any, tmp_path: Path, writer: str
) -> None:
    """100 rows, ids 1-3 upserted to v=1 in a delta commit (log blocks), then ids 4-5
    upserted through Spark: refused with one line naming the table type and what writes it,
    no instant begun, and ids 1-3 still read v=1 (a rewrite from the base alone read 0)."""
    spark = registered
    uri = str(tmp_path / "mor")
    props = KeyedProperties.of("id", table_type="merge_on_read")
    table = Table.create(open_store(uri), props, TableSettings(compaction_mode="off"))
    table.upsert(pa.table({"id": list(range(100)), "v": [0] * 100}))
    table.upsert(pa.table({"id": [1, 2, 3], "v": [1, 1, 1]}))
    assert table.merge_on_read_slices() is not None  # the update is in logs
    before = _values(table)
    instants = table.timeline().instants
    df = spark.createDataFrame([(4, 1), (5, 1)], "id long, v long")
    with pytest.raises(WriterNotSupported) as caught:
        if writer == "datasource":
            fs.save(df, uri, options={"operation": "upsert"})
        else:
            fs.write(df, uri, options={"operation": "upsert"})
    message = str(caught.value)
    assert "\n" not in message
    assert "merge_on_read" in message and "Table.upsert" in message
    assert kind_of(caught.value) == ErrorKind.REFUSED and answer_for(caught.value).exit_code == 1
    after = Table.open(open_store(uri))
    assert after.timeline().instants == instants  # nothing begun, nothing to roll back
    assert _values(after) == before
    assert [before[i] for i in (1, 2, 3, 4, 5)] == [1, 1, 1, 0, 0]


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


def test_a_merge_on_read_table_asked_for_or_stored_is_refused_before_creating(
    registered: Any, tmp_path: Path
) -> None:
    """Hudi's table-type option asking for merge-on-read is refused, and nothing is created;
    the record key given for a stored merge-on-read table is refused the same way (not as a
    change of properties)."""
    spark = registered
    df = spark.createDataFrame([(1, 1)], "id long, v long")
    uri = str(tmp_path / "new")
    opts = {"recordKey": "id", "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    with pytest.raises(WriterNotSupported, match="merge_on_read"):
        fs.write(df, uri, options={**opts, "operation": "upsert"})
    assert Table.open(open_store(uri)).properties is None  # no table was created
    with pytest.raises(SparkWriteError, match="tableType"):
        requested_properties({"recordKey": "id", "tableType": "mor_please"})
    stored = str(tmp_path / "stored")
    Table.create(open_store(stored), KeyedProperties.of("id", table_type="merge_on_read"))
    with pytest.raises(WriterNotSupported, match="merge_on_read"):
        fs.save(df, stored, options={"recordKey": "id", "operation": "upsert"})
    cow = str(tmp_path / "cow")
    fs.write(df, cow, options={"recordKey": "id", "tableType": "copy_on_write"})
    props = Table.open(open_store(cow)).properties
    assert props is not None and props.table_type == "copy_on_write"


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
