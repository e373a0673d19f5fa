"""A table's current schema: the newest live write's, and the check of a new write against it
(the rules are in schema.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from .instant import RESTORE, ROLLBACK, parse_name
from .schema import entry_schema, merge_schemas, schema_from_json
from .snapshot import TableState

if TYPE_CHECKING:
    from .table_context import TableContext


def check_schema(
    current: TableContext | TableState | pa.Schema | None, new_schema: pa.Schema
) -> pa.Schema:
    """The merged schema a write of `new_schema` gives the table (public: the Spark writers use
    it too). `current` is a table (its latest state is loaded), a TableState, or a schema."""
    where = ""
    if isinstance(current, TableState):
        current = current.schema()
    elif current is not None and not isinstance(current, pa.Schema):
        where = current.uri
        current = latest_schema(current)  # fresh: a stale one would miss a concurrent change
    return merge_schemas(current, new_schema, where)


def latest_schema(table: TableContext, refresh: bool = True) -> pa.Schema | None:
    """The schema the table's newest live write states, reading entries newest first (usually
    one GET, where folding the whole state reads every completed instant)."""
    done = (table.timeline() if refresh else table.instants.planning_timeline()).completed()
    gone = {
        parse_name(n).time
        for i in done.actions(ROLLBACK, RESTORE)
        for n in table.tl.entry_of(i).rolled_back
    }
    # A write this object completed after the view was listed states a schema that was
    # validated against every completion before it: it is as new as the view needs.
    noted = table.instants.noted_schema
    if noted is not None and noted[1] in gone:
        noted = None
    for i in reversed(done.write_timeline().by_completion()):
        if noted is not None and noted[0] >= (i.seq or 0):
            break
        if i.time not in gone:
            found = entry_schema(table.tl.entry_of(i).metadata)
            if found is not None:
                return found
    if noted is not None:
        return schema_from_json(noted[2])
    if not done and table.instants.latest_seq == 0:
        return None  # a new table (archival always leaves the newest commit active)
    return table.state(refresh=False).schema()  # e.g. every write archived


__all__ = ["check_schema", "latest_schema"]
