"""`table.maintenance`: the table services of one table, beside its data operations.

A thin facade (as pyiceberg's `table.maintenance` and delta-rs's `TableOptimizer` are): each
method hands the table to the service that does the work (services.py, clustering.py,
recovery.py) or to the compaction service the table was built with (keyed tables hand theirs
in, so this module knows nothing of keys).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .clustering import cluster
from .recovery import handle_failed_writes
from .services import clean, restore, rollback, savepoint

if TYPE_CHECKING:
    from .instant import Instant
    from .table import Table


class CompactionService(Protocol):
    """Merge-on-read compaction of one table (keyed tables: keyed/operations.py)."""

    def compact(self, *, force: bool = True) -> Instant | None: ...

    def schedule(self, *, force: bool = True) -> str | None: ...

    def run(self, instant_time: str | None = None) -> list[str]: ...


class Maintenance:
    """Clean, cluster, compact, roll back, savepoint, restore and recover one table."""

    def __init__(self, table: Table, compaction: CompactionService) -> None:
        self.table = table
        self.compaction = compaction

    def clean(self, policy: str | None = None, retained: int | None = None) -> Instant | None:
        """Delete file slices no reader needs under the retention policy; None if none."""
        return clean(self.table, policy, retained)

    def cluster(self, partition: str | None = None) -> Instant | None:
        """Rewrite small files into bigger ones (a replacecommit); None if nothing to do."""
        return cluster(self.table, partition)

    def rollback(self, instant_time: str) -> Instant:
        """Undo a pending or completed instant (a rollback instant)."""
        return rollback(self.table, instant_time)

    def savepoint(self, instant_time: str) -> Instant:
        """Keep a completed instant readable: clean and archival stop before it."""
        return savepoint(self.table, instant_time)

    def restore(self, instant_time: str) -> Instant:
        """Bring the table back to a savepointed instant (later instants rolled back)."""
        return restore(self.table, instant_time)

    def recover(self) -> list[str]:
        """Roll back failed writes (heartbeat expired) and finish pending table services."""
        return handle_failed_writes(self.table, self.table.instants.refresh(), exclude="")

    def compact(self, *, force: bool = True) -> Instant | None:
        """Merge-on-read: schedule (always with `force`, else when the trigger fires) and
        execute one compaction; None when no file group has logs to fold."""
        return self.compaction.compact(force=force)

    def schedule_compaction(self, *, force: bool = True) -> str | None:
        """Write a compaction plan (`compaction.requested`) to execute later; its time."""
        return self.compaction.schedule(force=force)

    def run_compaction(self, instant_time: str | None = None) -> list[str]:
        """Execute one scheduled compaction, or every pending one nobody is running."""
        return self.compaction.run(instant_time)


__all__ = ["CompactionService", "Maintenance"]
