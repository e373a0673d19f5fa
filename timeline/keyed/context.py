"""The narrow table context keyed code works against: the timeline's `WritableTable` (store,
settings, state, begin, the instant store) plus what keyed tables add to a table, their
properties and the compactions it runs in the background. `Table` satisfies it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from ..txn import WritableTable

if TYPE_CHECKING:
    from .properties import KeyedProperties


class KeyedTable(WritableTable, Protocol):
    background: list[threading.Thread]

    @property
    def properties(self) -> KeyedProperties | None: ...
