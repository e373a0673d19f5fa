"""The table handles a Spark session's keyed writes keep from one write to the next, as a
Python program keeps its `Table`: the next write's driver then reads only what changed on
the timeline (its `begin` and plan refresh it) instead of opening the table again (a
listing, the properties, the newest entries).

A handle is taken out while a write uses it and put back only after that write committed,
so two writes of one session at once each have their own, and a failed write leaves none
behind. Handles belong to the session they were made on and go with it. A table deleted and
made again under the same URI with other properties is not noticed by a kept handle:
`forget_tables(spark)` drops them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from storage import StoreSettings, open_store
from timeline import Table, TableSettings

_HANDLES = "_flowledger_table_handles"

Key = tuple[str, StoreSettings, TableSettings]


def _handles(spark: Any) -> dict[Key, Table]:
    handles: dict[Key, Table] | None = getattr(spark, _HANDLES, None)
    if handles is None:
        handles = {}
        setattr(spark, _HANDLES, handles)
    return handles


def _kept_as(key: Key) -> Key:
    """`key` without the settings' writer id (each `TableSettings` draws its own; a kept
    handle writes on as the writer it was opened as)."""
    store_uri, settings, table_settings = key
    return store_uri, settings, replace(table_settings, writer_id="")


def take_table(spark: Any, key: Key) -> Table:
    """The session's kept handle on the table (taken out), or the table opened."""
    table = _handles(spark).pop(_kept_as(key), None)  # one dict operation: atomic
    if table is None:
        store_uri, settings, table_settings = key
        table = Table.open(open_store(store_uri, settings), table_settings)
    return table


def keep_table(spark: Any, key: Key, table: Table) -> None:
    """Keep `table` (a write through it just committed) for the session's next write."""
    _handles(spark)[_kept_as(key)] = table


def forget_tables(spark: Any) -> None:
    """Drop every handle the session kept."""
    _handles(spark).clear()


__all__ = ["Key", "forget_tables", "keep_table", "take_table"]
