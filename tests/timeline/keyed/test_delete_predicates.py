"""A filter delete's SQL predicate is one boolean expression over the table's columns,
evaluated in the SQL sandbox: statements, subqueries and table functions (which read or write
files) are refused before anything is written, and so are predicates that do not bind."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from timeline import InvalidPredicate, Table, TableSettings
from timeline.keyed import KeyedProperties
from timeline.predicate import matches

pytestmark = pytest.mark.unit


def _table(tmp_path: Path, table_type: str = "copy_on_write") -> Table:
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    props = KeyedProperties.of("id", table_type=table_type)
    t = Table.create(store, props, TableSettings(local_entry_cache=False))
    t.upsert(pa.table({"id": [1, 2, 3], "v": [1, 1, 2], "s": ["a", "b", "c"]}))
    return t


def _hostile(tmp_path: Path) -> list[str]:
    secret = tmp_path / "secret.txt"
    secret.write_text("x\n")
    return [
        f"length((SELECT content FROM read_text('{secret}'))) > 0",
        f"v = 1; COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'",
        f"v = 1; ATTACH '{tmp_path / 'x.db'}'",
        f"EXISTS (SELECT * FROM glob('{tmp_path}/*'))",
        f"v IN (SELECT 1 FROM read_csv('{secret}'))",
        f"len(glob('{tmp_path}/*')) > 0",
        "v = 1) UNION ALL (SELECT 1",
        "true) ORDER BY (1",
        "true; SET enable_external_access=true",
        "",
    ]


def _objects(tmp_path: Path) -> list[str]:
    return sorted(str(p) for p in (tmp_path / "t").rglob("*"))


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_a_predicate_that_is_a_program_is_refused_and_nothing_is_touched(
    tmp_path: Path, table_type: str
) -> None:
    t = _table(tmp_path, table_type)
    before = _objects(tmp_path)
    for where in _hostile(tmp_path):
        with pytest.raises(InvalidPredicate) as err:
            t.delete(where=where)
        assert "\n" not in str(err.value), where
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.db").exists()
    assert _objects(tmp_path) == before  # refused before an instant began
    assert sorted(r["id"] for r in t.read().to_pylist()) == [1, 2, 3]
    t.delete(where="v = 1 --")  # a trailing comment: still one expression
    assert [r["id"] for r in t.read().to_pylist()] == [3]


def test_a_predicate_that_does_not_bind_names_the_problem(tmp_path: Path) -> None:
    t = _table(tmp_path)
    with pytest.raises(InvalidPredicate, match=r"unknown column\(s\) nope; .*id, v, s"):
        t.delete(where="nope = 1")
    with pytest.raises(InvalidPredicate, match="BIGINT, not a boolean"):
        t.delete(where="v + 1")
    with pytest.raises(InvalidPredicate, match="not one SQL expression"):
        t.delete(where="v = = 1")
    with pytest.raises(InvalidPredicate, match="aggregates"):
        t.delete(where="count(*) > 0")
    assert sorted(r["id"] for r in t.read().to_pylist()) == [1, 2, 3]


def test_ordinary_predicates_still_delete(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.delete(where="lower(s) IN ('a', 'c') AND v BETWEEN 1 AND 2 OR _flowledger_record_key = '9'")
    assert [r["id"] for r in t.read().to_pylist()] == [2]


def test_matches_reads_only_the_rows_it_is_given(tmp_path: Path) -> None:
    rows = pa.table({"v": [1, 2, None]})
    assert matches(rows, "v >= 1") == [0, 1]
    assert matches(rows, "v IS NULL") == [2]
    for where in _hostile(tmp_path):
        with pytest.raises(InvalidPredicate):
            matches(rows, where)
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.db").exists()


def test_a_table_without_data_still_refuses_programs(tmp_path: Path) -> None:
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    t = Table.create(store, KeyedProperties.of("id"), TableSettings(local_entry_cache=False))
    with pytest.raises(InvalidPredicate, match="subquery"):
        t.delete(where="EXISTS (SELECT 1)")
    t.delete(where="v = 1")  # no columns to bind to yet, and no row to delete
    assert t.read().num_rows == 0
