"""The keyed table the outside-reader tests read without flowledger: 100 rows over two
partitions, a third of them updated with a column added later, then 10 deleted, so a listed
snapshot holds 90 rows (30 with `v = 'x'`) while the folder also holds replaced slices."""

from __future__ import annotations

import pyarrow as pa

from storage import open_store
from timeline import Table
from timeline.keyed import KeyedProperties


def evolved_table(uri: str) -> Table:
    table = Table.create(open_store(uri), KeyedProperties.of("id", partition_by=("p",)))
    table.upsert(pa.table({"id": list(range(100)), "p": [i % 2 for i in range(100)]}))
    changed = list(range(0, 100, 3))
    table.upsert(pa.table({"id": changed, "p": [i % 2 for i in changed], "v": ["x"] * 34}))
    table.delete(list(range(90, 100)))
    return table
