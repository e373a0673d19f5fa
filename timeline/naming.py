"""Which partition naming an unkeyed table writes with (`partitioning`: `hive` or `legacy`).

A keyed table states it in its properties. An unkeyed table has no properties object, so
its first partitioned write records the naming in a create-only object,
`_timeline/partition-naming.json`: `hive` for a table that holds no partitioned file yet,
`legacy` for one that already holds partitions named the old way (written before), so that
a table never mixes the two and its existing partitions keep their names.
"""

from __future__ import annotations

from collections.abc import Callable

from storage import Conflict, NotFound, ObjectStore, open_json, seal_json

from .errors import CorruptTimelineObject
from .layout import TIMELINE
from .partitioning import PartitionNaming, check_naming
from .snapshot import TableState

NAMING_KEY = TIMELINE + "partition-naming.json"
FORMAT = "flowledger.partition-naming/1"


def _read(store: ObjectStore) -> PartitionNaming | None:
    try:
        body = store.get(NAMING_KEY)
    except NotFound:
        return None
    where = store.url(NAMING_KEY)
    d = open_json(body, where)
    if d.get("format") != FORMAT or not isinstance(d.get("partition_naming"), str):
        raise CorruptTimelineObject(f"{where}: not a partition naming object ({FORMAT})")
    return check_naming(d["partition_naming"])


def unkeyed_naming(store: ObjectStore, state: Callable[[], TableState]) -> PartitionNaming:
    """The naming recorded for the table; recorded first when there is none (one GET when
    there is; else the table's state decides, and a PUT if-absent fixes it for good)."""
    recorded = _read(store)
    if recorded is not None:
        return recorded
    st = state()
    old = any(f.partition for e in st.writes.values() for f in e.added)
    naming = PartitionNaming.LEGACY if old else PartitionNaming.HIVE
    try:
        store.put_if_absent(
            NAMING_KEY, seal_json({"format": FORMAT, "partition_naming": naming.value})
        )
    except Conflict:  # another writer recorded it first: its choice holds
        return _read(store) or naming
    return naming
