"""Partition naming: Hive's and Spark's percent-escaping for new tables, the old lossy naming
kept by tables written before it (never both in one table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import ObjectStore, open_json, open_store, seal_json
from timeline import (
    COMMIT,
    HIVE_NAMING,
    LEGACY_NAMING,
    NULL_PARTITION,
    PartitionNamingError,
    Table,
    parse_partition,
    partition_path,
    partition_value,
    split_partitions,
)
from timeline.keyed import KeyedProperties
from timeline.keyed.properties import FORMAT, FORMATS, PROPERTIES_KEY
from timeline.naming import NAMING_KEY
from timeline.partitioning import ESCAPED
from timeline.writes import put_table

pytestmark = pytest.mark.unit

#: The properties format of keyed tables written before partition naming was recorded.
OLD_FORMAT = "flowledger.table-properties/1"

#: Spark's `ExternalCatalogUtils.charToEscape` (Hive's `FileUtils`), the characters it adds
#: on Windows, and NUL.
SPARK_ESCAPES = (
    [chr(c) for c in range(0x01, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
    + [" ", "<", ">", "|"]
    + ["\x00"]
)


def test_the_escaped_characters_are_spark_s() -> None:
    assert set(SPARK_ESCAPES) == ESCAPED
    kept = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in ESCAPED]
    assert all(partition_value(c, HIVE_NAMING) == c for c in kept)


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("x y", "x%20y"),
        ("a/b", "a%2Fb"),
        ("x_y", "x_y"),
        ("50%", "50%25"),
        ("a=b", "a%3Db"),
        ("é ü", "é%20ü"),
        ("", ""),
        (None, NULL_PARTITION),
        (NULL_PARTITION, "%5F_HIVE_DEFAULT_PARTITION__"),
        ("\x00\n", "%00%0A"),
        (7, "7"),
    ],
)
def test_values_are_escaped_as_hive_and_spark_write_them(value: Any, name: str) -> None:
    assert partition_value(value, HIVE_NAMING) == name


def test_distinct_values_have_distinct_names_that_read_back() -> None:
    values: list[Any] = [
        "x y", "x_y", "x/y", "x=y", "x%y", "x%20y", "x%2", "é ü", "é_ü", "",
        NULL_PARTITION, None, "%", "a:b", "1",
    ]  # fmt: skip
    names = [partition_path([("p q", v), ("n", 1)], naming=HIVE_NAMING) for v in values]
    assert len(set(names)) == len(values)
    for v, name in zip(values, names, strict=True):
        assert parse_partition(name, naming=HIVE_NAMING) == [("p q", v), ("n", "1")]
    assert names[0] == "p%20q=x%20y/n=1"
    legacy = {partition_path([("p", v)], naming=LEGACY_NAMING) for v in values[:4]}
    assert legacy == {"p=x_y"}  # what older tables hold: look-alike values share a name


def test_an_unknown_naming_is_refused_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(
        PartitionNamingError, match="partition naming must be one of hive, legacy, not 'v9'"
    ):
        partition_value("x", "v9")
    store = open_store(str(tmp_path / "t"))
    store.put(NAMING_KEY, seal_json({"format": "flowledger.partition-naming/1",
                                     "partition_naming": "v9"}))  # fmt: skip
    with pytest.raises(PartitionNamingError, match="newer flowledger"):
        Table.open(store).write(pa.table({"p": ["a"]}), partition_by="p")


# -- what tables record -----------------------------------------------------------------------
def _naming_object(store: ObjectStore) -> Any:
    return open_json(store.get(NAMING_KEY), NAMING_KEY)["partition_naming"]


def test_new_tables_record_the_escaped_naming(tmp_path: Path) -> None:
    keyed = open_store(str(tmp_path / "keyed"))
    Table.create(keyed, KeyedProperties.of("id", partition_by="p"))
    written = open_json(keyed.get(PROPERTIES_KEY), "")
    assert (written["format"], written["partition_naming"]) == (FORMAT, HIVE_NAMING)
    assert FORMATS == (OLD_FORMAT, FORMAT)  # older versions refuse `FORMAT`: no mixed names
    assert Table.open(keyed).partition_naming() == HIVE_NAMING

    unkeyed = open_store(str(tmp_path / "unkeyed"))
    Table.open(unkeyed).write(pa.table({"v": [1]}))  # unpartitioned: nothing to decide
    assert not unkeyed.exists(NAMING_KEY)
    Table.open(unkeyed).write(pa.table({"p": ["x y"], "v": [2]}), partition_by="p")
    assert _naming_object(unkeyed) == HIVE_NAMING
    assert {f.partition for f in Table.open(unkeyed).snapshot().files} == {"", "p=x%20y"}


# -- tables written before: their names stay ---------------------------------------------------
ROWS = pa.table({"p": ["x y", "a/b", None], "v": [1, 2, 3]})


def _old_unkeyed(store: ObjectStore) -> Table:
    """A table as earlier versions wrote it: legacy names, no naming object."""
    table = Table.open(store)
    txn = table.begin(COMMIT, operation="insert")
    txn.schema = ROWS.schema
    for name, piece in split_partitions(ROWS, ["p"], naming=LEGACY_NAMING):
        put_table(txn, name, piece)
    txn.commit()
    return Table.open(store)


def test_an_older_unkeyed_table_reads_and_writes_with_its_names(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "t"))
    table = _old_unkeyed(store)
    assert sorted(table.read().column("v").to_pylist()) == [1, 2, 3]
    table.write(pa.table({"p": ["x y", "q r"], "v": [4, 5]}), partition_by="p")
    assert _naming_object(store) == LEGACY_NAMING
    names = {f.partition for f in Table.open(store).snapshot().files}
    assert names == {"p=x_y", "p=a_b", f"p={NULL_PARTITION}", "p=q_r"}  # never `p=x%20y`
    Table.open(store).write(pa.table({"p": ["a/b"], "v": [6]}), mode="overwrite", partition_by="p")
    got = sorted(Table.open(store).read().to_pylist(), key=lambda r: r["v"])
    assert got == [
        {"p": "x y", "v": 1},
        {"p": None, "v": 3},
        {"p": "x y", "v": 4},
        {"p": "q r", "v": 5},
        {"p": "a/b", "v": 6},
    ]


def test_an_older_keyed_table_keeps_its_names(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "t"))
    props = KeyedProperties.of("v", partition_by="p", key_scope="partition")
    old = {k: v for k, v in props.to_json().items() if k != "partition_naming"}
    store.put_if_absent(PROPERTIES_KEY, seal_json({"format": OLD_FORMAT, **old}))
    table = Table.create(store, props)  # the same properties: a no-op, not a change
    assert table.partition_naming() == LEGACY_NAMING
    table.upsert(ROWS)
    table.upsert(pa.table({"p": ["x y"], "v": [1]}))
    reopened = Table.open(store)
    assert {f.partition for f in reopened.snapshot().files} == {
        "p=x_y", "p=a_b", f"p={NULL_PARTITION}"
    }  # fmt: skip
    got = sorted(reopened.read().select(["p", "v"]).to_pylist(), key=lambda r: r["v"])
    assert got == [{"p": "x y", "v": 1}, {"p": "a/b", "v": 2}, {"p": None, "v": 3}]
