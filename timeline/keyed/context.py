"""The narrow table context keyed code works against: the timeline's `TableContext` (store,
settings, state, begin, the instant store) plus what keyed tables add to a table, their
properties and the compactions it runs in the background. `Table` satisfies it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from ..table_context import TableContext

if TYPE_CHECKING:
    from .properties import KeyedProperties


class KeyedTable(TableContext, Protocol):
    background: list[threading.Thread]

    @property
    def properties(self) -> KeyedProperties | None: ...
