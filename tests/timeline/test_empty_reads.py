"""A read that finds no rows still has the table's columns and types: a snapshot with no file
left (every partition dropped), all rows deleted, a filter that matches nothing, a change read
with no change; copy-on-write, merge-on-read and unkeyed tables alike."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage import open_store
from timeline import Table
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit

META = ["_flowledger_commit_time", "_flowledger_record_key"]
ROWS = pa.table({"id": [1, 2], "p": ["a", "b"], "v": [1.5, 2.5]})
TYPES = {"id": pa.int64(), "p": pa.string(), "v": pa.float64()}


def _table(tmp_path: Path, table_type: str | None) -> Table:
    store = open_store(str(tmp_path / "t"))
    if table_type is None:
        t = Table.open(store)
        t.write(ROWS, partition_by=["p"])
        return t
    t = Table.create(store, KeyedProperties.of("id", partition_by=["p"], table_type=table_type))
    t.upsert(ROWS)
    return t


def _types(t: pa.Table) -> dict[str, pa.DataType]:
    return {f.name: f.type for f in t.schema if not f.name.startswith("_flowledger")}


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read", None])
def test_a_snapshot_with_no_file_left_keeps_the_schema(
    tmp_path: Path, table_type: str | None
) -> None:
    t = _table(tmp_path, table_type)
    full = t.read()
    t.delete_partition(["p=a", "p=b"])  # no file left in the snapshot
    for got in (t.read(), t.read(read_optimized=True)):
        assert got.num_rows == 0
        assert got.column_names == full.column_names
        assert _types(got) == TYPES
    assert t.read(columns=["v", "id"]).schema.names == ["v", "id"]
    assert t.read(columns=["v"]).schema.field("v").type == pa.float64()


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_every_empty_keyed_read_keeps_the_schema(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path, table_type)
    before = t.upsert(pa.table({"id": [1], "p": ["a"], "v": [3.5]}))
    names = [*META, "id", "p", "v"]
    assert t.read().filter(pc.field("id") > 10).column_names == names  # matches nothing
    assert t.changes(before.time).column_names == names  # no change since
    deleted = t.delete([1, 2])
    assert t.read().num_rows == 0 and t.read().column_names == names
    assert _types(t.read()) == TYPES
    assert t.changes(deleted.time).column_names == names
    assert t.read(as_of=before.time).num_rows == 2


def test_a_fresh_keyed_table_reads_with_the_schema_it_has(tmp_path: Path) -> None:
    t = Table.create(open_store(str(tmp_path / "t")), KeyedProperties.of("id"))
    schema = t.schema()
    assert schema is not None  # what its creation states: the columns every row carries
    got = t.read()
    assert got.num_rows == 0 and got.column_names == schema.names == META
