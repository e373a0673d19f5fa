"""Which optimized plans (as `explain` prints them) count as a plain Parquet scan."""

from __future__ import annotations

import pytest

from flowledger.spark.direct_scan import plain_relation

pytestmark = pytest.mark.unit

RELATION = "Relation [id#0L,ts#1,s#2] parquet"
CACHED = "InMemoryRelation [id#0L, s#2], StorageLevel(disk, memory, deserialized, 1 replicas)"
SCAN = (
    "FileScan parquet [id#0L,s#2] Batched: true, DataFilters: [], Format: Parquet, Location: "
    "InMemoryFileIndex(1 paths)[file:/in/a.parquet], PartitionFilters: [], PushedFilters: [], "
    "ReadSchema: struct<id:bigint,s:string>"
)


@pytest.mark.parametrize(
    ("lines", "plain"),
    [
        ([RELATION], True),
        (["Project [s#2, id#0L]", "+- " + RELATION], True),
        (["Project [id#0L AS x#4L]", "+- " + RELATION], False),  # an alias
        (["Project [(id#0L + 1) AS id#4L]", "+- " + RELATION], False),  # an expression
        (["Filter (isnotnull(id#0L) AND (id#0L > 1))", "+- " + RELATION], False),
        (["GlobalLimit 2", "+- LocalLimit 2", "   +- " + RELATION], False),
        (["Relation [id#0L,s#2] json"], False),
        ([CACHED, "+- *(1) ColumnarToRow", "   +- " + SCAN], False),  # a cache: no files
        (["Join Inner", ":- " + RELATION, "+- " + RELATION], False),
        ([], False),
    ],
)
def test_plain_relation(lines: list[str], plain: bool) -> None:
    assert plain_relation([line.strip() for line in lines]) is plain
