"""A table's schema: recorded in every write's commit metadata, enforced, evolved."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import open_store
from timeline import SchemaMismatch, Table, check_schema

pytestmark = pytest.mark.unit


def _table(tmp_path: Path) -> Table:
    return Table.open(open_store(str(tmp_path / "t")))


def test_schema_is_recorded_in_every_write(tmp_path: Path) -> None:
    table = _table(tmp_path)
    first = table.write(pa.table({"id": pa.array([1], pa.int32()), "name": ["a"]}))
    second = table.write(pa.table({"id": pa.array([2], pa.int32()), "name": ["b"]}))
    for done in (first, second):
        fields = table.entry(done.time).metadata["schema"]["fields"]
        assert [(f["name"], f["type"]) for f in fields] == [("id", "int32"), ("name", "string")]


def test_mismatch_is_refused_and_the_table_stays_readable(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.write(pa.table({"id": [1, 2], "name": ["a", "b"]}))
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"id": ["x"], "name": [3.5]}), bad)
    before = sorted(o.key for o in table.store.list(""))
    with pytest.raises(SchemaMismatch) as err:
        table.write([str(bad)])
    msg = str(err.value)
    assert "\n" not in msg
    assert "id: table has int64, file has string" in msg
    assert "name: table has string, file has double" in msg
    assert err.value.columns == ["id", "name"]
    assert sorted(o.key for o in table.store.list("")) == before  # nothing half-applied
    assert table.read().column("id").to_pylist() == [1, 2]


def test_documented_evolution(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.write(pa.table({"id": pa.array([1], pa.int8()), "v": pa.array([0.5], pa.float32())}))
    table.write(
        pa.table(
            {
                "id": pa.array([300], pa.int16()),
                "v": pa.array([1.25], pa.float64()),
                "extra": ["new"],
            }
        )
    )
    table.write(pa.table({"id": pa.array([5], pa.int64())}))  # nullable columns left out
    data = table.read()
    assert data.schema.field("id").type == pa.int64()
    assert data.schema.field("v").type == pa.float64()
    assert data.column("id").to_pylist() == [1, 300, 5]
    assert data.column("extra").to_pylist() == [None, "new", None]
    schema = table.schema()
    assert schema is not None and schema.names == ["id", "v", "extra"]
    # A narrower write into a widened column is fine; the recorded schema stays wide.
    table.write(pa.table({"id": pa.array([7], pa.int8())}))
    assert table.read().column("id").type == pa.int64()
    # Narrowing, changing kind, or adding a non-nullable column is refused.
    with pytest.raises(SchemaMismatch, match="v: table has double, file has int64"):
        table.write(pa.table({"v": pa.array([1], pa.int64())}))
    required = pa.schema([pa.field("req", pa.int32(), nullable=False)])
    with pytest.raises(SchemaMismatch, match="new columns must be nullable"):
        table.write(pa.table({"req": pa.array([1], pa.int32())}, schema=required))


def test_check_schema_is_public_for_other_writers(tmp_path: Path) -> None:
    table = _table(tmp_path)
    assert check_schema(table, pa.schema([("a", pa.int32())])) == pa.schema([("a", pa.int32())])
    table.write(pa.table({"a": pa.array([1], pa.int32())}))
    merged = check_schema(table.state(), pa.schema([("a", pa.int64()), ("b", pa.string())]))
    assert merged == pa.schema([("a", pa.int64()), ("b", pa.string())])
    with pytest.raises(SchemaMismatch, match="a: table has int32, file has string"):
        check_schema(table, pa.schema([("a", pa.string())]))
    # A writer on the transaction API records it with txn.schema.
    txn = table.begin()
    txn.schema = merged
    done = txn.commit()
    assert table.entry(done.time).metadata["schema"]["fields"][1]["name"] == "b"


def test_concurrent_incompatible_schema_change_conflicts(tmp_path: Path) -> None:
    from timeline import CommitConflict

    table = _table(tmp_path)
    table.write(pa.table({"a": [1]}))
    other = _table(tmp_path)
    mine = table.begin()
    mine.schema = check_schema(table.state(), pa.schema([("a", pa.int64()), ("b", pa.string())]))
    other.write(pa.table({"a": [2], "b": [1.5]}))  # completes first with b: double
    with pytest.raises(CommitConflict, match="schema changed concurrently"):
        mine.commit()
    assert _table(tmp_path).read().column("b").to_pylist() == [None, 1.5]


def test_cli_refuses_a_mismatched_file_on_one_line(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("id,name\n1,a\n")
    bad.write_text("id,name\nx,2\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "flowledger", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    assert cli("table", "write", uri, str(good)).returncode == 0
    res = cli("table", "write", uri, str(bad))
    assert res.returncode == 2  # invalid input
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "id: table has int64, file has string" in lines[0]
    assert "name: table has string, file has int64" in lines[0]
    read = cli("table", "read", uri, "--count")
    assert read.returncode == 0 and read.stdout.strip() == "1"


def test_schema_json_round_trips_every_kind_of_type() -> None:
    import json

    from timeline.schema import schema_from_json, schema_to_json

    schema = pa.schema(
        [
            pa.field("i", pa.int8(), nullable=False),
            ("ts", pa.timestamp("ms", tz="UTC")),
            ("l", pa.list_(pa.int32())),
            ("s", pa.struct([("x", pa.float32())])),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("d", pa.decimal128(10, 2)),
            ("day", pa.date32()),
            ("t", pa.time64("us")),
            ("fixed", pa.binary(4)),  # no alias: Arrow IPC bytes
        ]
    )
    text = json.dumps(schema_to_json(schema), sort_keys=True)
    assert schema_from_json(json.loads(text)) == schema
    assert json.dumps(schema_to_json(schema_from_json(json.loads(text))), sort_keys=True) == text


def test_rolled_back_write_takes_its_schema_change_with_it(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.write(pa.table({"a": [1]}))
    added = table.write(pa.table({"a": [2], "b": ["text"]}))
    table.maintenance.rollback(added.time)
    schema = table.schema()
    assert schema is not None and schema.names == ["a"]
    table.write(pa.table({"a": [3], "b": [4.5]}))  # b is new again, of another type
    assert _table(tmp_path).read().column("b").to_pylist() == [None, 4.5]
