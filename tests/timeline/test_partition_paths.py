"""Distinct partition values are distinct partitions, on every write path and backend.

Values that differ only in characters a path cannot hold as they are (space, `/`, `%`, `=`,
non-ASCII, a literal null name) must never share a partition: insert_overwrite of one
partition leaves the others, and with partition-scoped keys each (partition, key) pair is
one record. Run on the local filesystem and on MinIO, where the names are S3 keys.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tests.support.backends import Backend
from timeline import Table
from timeline.keyed import KeyedProperties
from timeline.keyed.index.indexing import build_index

#: Values that a lossy naming folds together (`x y`, `x/y`, `x=y` and `x_y` were all `x_y`;
#: `x%20y` is what an unescaped `%` would make of `x y`).
VALUES: list[Any] = [
    "x y",
    "x_y",
    "x/y",
    "x=y",
    "x%y",
    "x%20y",
    "é ü",
    "é_ü",
    "",
    "__HIVE_DEFAULT_PARTITION__",
    None,
]


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(r.values()) for r in t.select(["p", "id", "v"]).to_pylist()),
        key=lambda r: tuple((x is None, str(x)) for x in r),
    )


def _data(values: list[Any], v: int) -> pa.Table:
    return pa.table(
        {
            "p": pa.array(values, pa.string()),
            "id": pa.array([1] * len(values), pa.int64()),
            "v": pa.array([v] * len(values), pa.int64()),
        }
    )


def test_unkeyed_overwrite_of_one_partition_keeps_the_values_that_look_alike(
    tbackend: Backend,
) -> None:
    table = Table.open(tbackend.open())
    table.write(_data(VALUES, 0), partition_by="p")
    assert len({f.partition for f in table.snapshot().files}) == len(VALUES)
    table.write(_data(["x_y"], 1), mode="overwrite", partition_by="p")
    expected = [(p, 1, 1 if p == "x_y" else 0) for p in VALUES]
    assert _rows(Table.open(tbackend.open()).read()) == sorted(
        expected, key=lambda r: tuple((x is None, str(x)) for x in r)
    )


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_partition_scoped_keys_in_look_alike_partitions_are_distinct_records(
    tbackend: Backend, table_type: str
) -> None:
    props = KeyedProperties.of("id", partition_by="p", key_scope="partition", table_type=table_type)
    table = Table.create(tbackend.open(), props)
    table.upsert(_data(VALUES, 0))
    build_index(table)  # the record index's identities are (partition, key)
    table.upsert(_data(["x_y", "é_ü"], 2))
    table.delete(pa.table({"p": pa.array(["x=y"]), "id": pa.array([1], pa.int64())}))
    expected = [(p, 1, 2 if p in ("x_y", "é_ü") else 0) for p in VALUES if p != "x=y"]
    expected.sort(key=lambda r: tuple((x is None, str(x)) for x in r))
    assert _rows(Table.open(tbackend.open()).read()) == expected
    # Services work per partition and file group: they keep the records apart too.
    table.maintenance.compact()
    table.maintenance.cluster()
    table.upsert(_data(["x y"], 3))
    expected = [(p, 1, 3) if p == "x y" else (p, k, v) for p, k, v in expected]
    assert _rows(Table.open(tbackend.open()).read()) == expected


def test_keyed_insert_overwrite_replaces_only_its_own_partition(tbackend: Backend) -> None:
    table = Table.create(tbackend.open(), KeyedProperties.of("id", partition_by="p"))
    table.upsert(pa.table({"p": ["x y", "x/y", "x_y"], "id": [1, 2, 3], "v": [0, 0, 0]}))
    table.write(pa.table({"p": ["x_y"], "id": [4], "v": [1]}), mode="overwrite")
    got = sorted(
        Table.open(tbackend.open()).read().select(["p", "id", "v"]).to_pylist(),
        key=lambda r: r["id"],
    )
    assert got == [
        {"p": "x y", "id": 1, "v": 0},
        {"p": "x/y", "id": 2, "v": 0},
        {"p": "x_y", "id": 4, "v": 1},
    ]
