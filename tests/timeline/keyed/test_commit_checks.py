"""Keyed tables hand their commit check to the commit path: files without the record-key
column are refused on a keyed table, and nothing is refused on an unkeyed one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from storage import open_store
from timeline import DataFile, Table, TimelineError
from timeline.keyed import RECORD_KEY_COL, KeyedProperties
from timeline.keyed.keys import keyed_files_check

pytestmark = pytest.mark.unit

_PLAIN = DataFile("data/x.parquet", 10, 1, column_stats={"id": {"min": 1, "max": 1}})
_KEYED_SCHEMA = pa.schema([(RECORD_KEY_COL, pa.string()), ("id", pa.int64())])


def test_the_check_names_a_file_without_the_key_column() -> None:
    problem = keyed_files_check(_KEYED_SCHEMA, [_PLAIN])
    assert problem is not None and "data/x.parquet" in problem and RECORD_KEY_COL in problem
    assert keyed_files_check(pa.schema([("id", pa.int64())]), [_PLAIN]) is None
    assert keyed_files_check(None, [_PLAIN]) is None


def test_a_keyed_table_refuses_plain_files_through_its_handed_in_check(tmp_path: Path) -> None:
    t = Table.create(open_store(str(tmp_path / "t")), KeyedProperties.of("id"))
    assert keyed_files_check in t.commit_checks
    t.upsert(pa.table({"id": [1, 2]}))
    txn = t.begin()
    txn.schema = t.schema()  # as an engine's commit states the table's schema
    plain = DataFile(txn.data_key("", "x.parquet"), 10, 1, column_stats=_PLAIN.column_stats)
    txn.add(plain)
    with pytest.raises(TimelineError, match=f"is a keyed table and {plain.path}"):
        txn.commit()
