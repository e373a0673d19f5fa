"""What the code beside a table uses of it: the narrow context writers, recovery, schema
lookups and keyed tables work against, instead of the whole `Table` (which imports them all).

`Table` satisfies it structurally; nothing here imports `table.py`, so a module that takes a
`TableContext` is no part of an import circle with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from storage import ObjectStore

    from .active import Timeline
    from .instant import Instant, InstantTimeGenerator
    from .metadata import DataFile
    from .settings import TableSettings
    from .snapshot import Snapshot, TableState
    from .store import Listing, TimelineStore
    from .table_instants import TableInstants


class CommitCheck(Protocol):
    """Asked before a write's metadata is written: why the files may not be committed to a
    table of this schema (said after the table's URI), or None. Keyed tables hand theirs
    in (`Table.commit_checks`), so the commit path knows nothing of keys."""

    def __call__(self, schema: pa.Schema | None, added: Sequence[DataFile]) -> str | None: ...


class RollsBack(Protocol):
    """The one table service the commit path and recovery call (`table.maintenance`)."""

    def rollback(self, instant_time: str) -> Instant: ...


class TableContext(Protocol):
    """A table's store, settings, timeline and state (beginning an instant on it:
    `txn.WritableTable`)."""

    store: ObjectStore
    settings: TableSettings
    tl: TimelineStore
    times: InstantTimeGenerator
    commit_checks: list[CommitCheck]

    @property
    def uri(self) -> str: ...

    @property
    def instants(self) -> TableInstants: ...

    @property
    def maintenance(self) -> RollsBack: ...

    def state(self, refresh: bool = True) -> TableState: ...

    def timeline(self, refresh: bool = True) -> Timeline: ...

    def snapshot(self, as_of: str | None = None, refresh: bool = True) -> Snapshot: ...

    def schema(self, as_of: str | None = None) -> pa.Schema | None: ...

    def refresh(self) -> Listing: ...

    def partition_naming(self) -> str: ...
