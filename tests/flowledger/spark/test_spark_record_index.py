"""Spark's keyed writers keep a table's record-level index as the Python path keeps it:
every Spark commit, a copy-on-write commit or a merge-on-read delta commit, names the delta
of the keys it inserted, moved or deleted, so the index tracks every file group; after
Spark and Python writes the index names every key as a rebuild from the files does, and
the rows are the Python path's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flowledger.spark as fs
from storage import open_store
from tests.support.keyed_spark import apply_rows
from tests.support.record_index import assert_index_matches_rebuild
from timeline import Table, TableSettings
from timeline.check import check_table
from timeline.keyed import KeyedProperties, build_index

pytestmark = pytest.mark.spark

COLUMNS = ["id", "p", "v", "ts"]
#: Spark writes after the index is built: updates and new keys, a key moving partition (a
#: global key), deletes of stored and unknown keys, inserts, a deleted key brought back.
SEQUENCE: list[tuple[str, list[tuple[int, int, int, int]]]] = [
    ("upsert", [(1, 1, 1, 2), (2, 0, 1, 2), (100, 0, 1, 2), (101, 1, 1, 2)]),
    ("upsert", [(5, 0, 5, 3), (7, 1, 5, 3)]),  # 5 moves to p=0 under global keys
    ("delete", [(3, 1, 0, 5), (100, 0, 0, 5), (555, 1, 0, 5)]),
    ("insert", [(200, 0, 2, 1), (201, 1, 2, 1)]),
    ("upsert", [(3, 1, 9, 9), (201, 1, 9, 9)]),
]


def _data(rows: list[tuple[int, int, int, int]]) -> pa.Table:
    return pa.table({k: [r[i] for r in rows] for i, k in enumerate(COLUMNS)})


def _rows(table: Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in table.read().select(COLUMNS).to_pylist())


@pytest.mark.parametrize(
    ("table_type", "writer", "scope"),
    [
        ("copy_on_write", "datasource", "partition"),
        ("copy_on_write", "native", "global"),
        ("merge_on_read", "datasource", "global"),
    ],
)
def test_spark_writes_keep_the_record_level_index_as_the_python_path(
    registered: Any, tmp_path: Path, table_type: str, writer: str, scope: str
) -> None:
    spark = registered
    props = KeyedProperties.of(
        "id", ordering_field="ts", partition_by="p", merge_mode="event_time",
        key_scope=scope, table_type=table_type,
    )  # fmt: skip
    settings = TableSettings(compaction_mode="off")
    py = Table.create(open_store(str(tmp_path / "py")), props, settings)
    uri = str(tmp_path / "spark")
    sp = Table.create(open_store(uri), props, settings)
    first = _data([(i, i % 2, 0, 1) for i in range(40)])
    for t in (py, sp):
        t.upsert(first)
        build_index(t)
    put = fs.save if writer == "datasource" else fs.write
    for operation, rows in SEQUENCE:
        apply_rows(py, operation, _data(rows))
        df = spark.createDataFrame(rows, "id long, p long, v long, ts long")
        if operation == "delete":
            df = df.select("id", "p", "ts")
        info = put(df, uri, options={"operation": operation})
        entry = Table.open(open_store(uri), settings).entry(info.instant_time)
        assert "record_index_delta" in entry.metadata, operation
    last = _data([(4, 0, 4, 9), (300, 1, 4, 9)])  # the Python writer after Spark's
    sp = Table.open(open_store(uri), settings)
    sp.upsert(last)
    py.upsert(last)
    assert _rows(sp) == _rows(py)
    assert check_table(Table.open(open_store(uri), settings)).problems == ()
    assert assert_index_matches_rebuild(Table.open(open_store(uri), settings)) == frozenset()
    assert assert_index_matches_rebuild(py) == frozenset()
