"""The events of a snapshot that are still in journals (not yet merged by a rollover)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from .catalog import Snapshot
from .layout import JournalRef
from .schema import SCHEMA


def unmerged_events(snap: Snapshot, load: Callable[[JournalRef], pa.Table]) -> pa.Table:
    """The events of `snap` still in journals (ids from its high-water mark on, so none is
    also in a committed file), in the storage schema: with `snap.files`, every event the SQL
    view `provenance` of `snap` shows. `load` reads one journal (cached by the caller)."""
    journals = [load(j) for j in snap.journals]
    if not journals:
        return SCHEMA.empty_table()
    recent = pa.concat_tables(journals)
    return recent.filter(pc.greater_equal(recent["event_id"], snap.high_water))
