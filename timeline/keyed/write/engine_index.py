"""The record-level index on an engine's keyed commits (keyed/write/engine.py), kept as the
one-process writer keeps it (docs/tables.md, "Record-level index"):

- the driver plans which index the write looks keys up in (the `keyed_index` setting and the
  index as of the planned state, `IndexView`, picklable) and the plan carries it, so every
  task routes its keys through the same index without listing anything: a task fetches only
  the base shards and row groups whose key range holds one of its keys, and the deltas;
- each shard's task writes the key changes of that shard (new and moved records with their
  file group, deleted ones with none) into one part named by its attempt;
- the commit names one delta: the one part that holds changes, or the parts merged into one
  object (the parts of failed attempts are swept with the rest of their objects).

Merge-on-read delta commits keep it the same way: each task writes the keys its log blocks
and new groups inserted and the keys it deleted (keyed/write/merge_on_read.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...layout import data_key
from ...settings import KeyedIndex, TableSettings
from ...snapshot import TableState
from ..index import (
    IndexFactory,
    IndexView,
    RecordLevelIndex,
    index_view,
    range_bloom_index,
    write_delta,
)
from ..index.record_index import INDEX_SCHEMA, ShardRef, read_shard
from ..properties import KeyedProperties

if TYPE_CHECKING:
    from storage import ObjectStore

    from ..index import KeyIndex

#: The name of the delta a commit names (one task's part keeps its attempt in its name).
DELTA_NAME = "_record_index_delta"


def planned_index(st: TableState) -> IndexView | None:
    """The record-level index a write keeps current (None: none is built, or it is
    stale)."""
    return index_view(st)


def index_factory(view: IndexView | None, settings: TableSettings) -> IndexFactory:
    """The index a task looks its keys up in: the planned record-level index under the
    `keyed_index` setting (`choose_index`'s rule), else key ranges and bloom filters."""

    def factory(store: ObjectStore, st: TableState, props: KeyedProperties) -> KeyIndex:
        fallback = range_bloom_index(store, st, props)
        if view is None or settings.keyed_index == KeyedIndex.RANGE_BLOOM:
            return fallback
        return RecordLevelIndex(store, view, props, fallback)

    return factory


def write_part(
    store: ObjectStore,
    instant_time: str,
    task: str,
    changes: Sequence[tuple[pa.Array, pa.Array, pa.Array]],
    settings: TableSettings,
) -> dict[str, Any]:
    """One shard's key changes as a delta part named by its task attempt and a name of its
    own, since one task may run several shards (`{"rows": 0}` when it changed no mapping:
    nothing is written)."""
    path = data_key(instant_time, "", f"{DELTA_NAME}.{task}.{uuid.uuid4().hex}.parquet")
    return write_delta(store, path, changes, settings)


def commit_delta(
    store: ObjectStore,
    instant_time: str,
    parts: Sequence[dict[str, Any] | None],
    settings: TableSettings,
) -> dict[str, Any]:
    """The delta the commit names, from its tasks' parts: the only part with rows as it is,
    several merged into one object (each read once, its checksum verified)."""
    refs = [ShardRef.from_json(p) for p in parts if p is not None and int(p.get("rows", 0))]
    if not refs:
        return {"rows": 0}
    if len(refs) == 1:
        return refs[0].to_json()
    changes: list[tuple[pa.Array, pa.Array, pa.Array]] = []
    for ref in refs:
        rows, _ = read_shard(store, ref)
        key, part, group = (rows.column(c).combine_chunks() for c in INDEX_SCHEMA.names)
        changes.append((key, part, group))
    path = data_key(instant_time, "", f"{DELTA_NAME}.parquet")
    return write_delta(store, path, changes, settings)


__all__ = ["commit_delta", "index_factory", "planned_index", "write_part"]
