"""A repository's rollovers, local or on Spark: one at a time per process, after the
journals buffered so far are flushed; then the writer's merged journal log is let go."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from storage import ObjectStore, ProgressCallback

from . import staging
from .freshness import SnapshotCache
from .journal import JournalWriter
from .journal_logs import LogIndex, delete_merged_logs
from .layout import JournalRef
from .maintenance import Backlog, merge_all
from .rollover import RolloverResult
from .settings import ProvenanceSettings
from .table import ProvenanceTable

Verify = Callable[[int, Sequence[JournalRef]], None]


class Rollovers:
    """Runs `ProvenanceRepository.rollover` (see there) against the repository's parts."""

    def __init__(
        self,
        root: ObjectStore,
        store: ObjectStore,
        table: ProvenanceTable,
        settings: ProvenanceSettings,
        parts: tuple[Backlog, JournalWriter, LogIndex, staging.Manifests, SnapshotCache],
        verify: Verify,
    ) -> None:
        self._root, self._store, self._table, self._settings = root, store, table, settings
        self._backlog, self._journals, self._logs, self._manifests, self._snapshots = parts
        self._verify = verify
        self._lock = threading.Lock()

    def local(self, progress: ProgressCallback | None = None) -> RolloverResult:
        with self._lock:
            self._journals.flush()
            try:
                return merge_all(
                    self._store,
                    self._table,
                    self._settings,
                    self._backlog,
                    progress,
                    self._verify,
                    self._manifests,
                )
            finally:
                self._release_merged_log()
                self._snapshots.invalidate()

    def spark(self, spark: Any) -> RolloverResult:
        from .spark_rollover import active_session, rollover_with_spark

        spark = active_session(spark)
        started = time.monotonic()
        with self._lock:
            self._journals.flush()
            result = rollover_with_spark(
                spark, self._root, self._store, self._table, self._settings, self._verify
            )
            if result is not None:
                self._backlog.drop_upto(result.end_id)
            self._release_merged_log()
            self._snapshots.invalidate()
            self._backlog.last_rollover = time.monotonic()
        if result is None:
            return RolloverResult(0, 0, 0, 0, 0, time.monotonic() - started)
        return result

    def _release_merged_log(self) -> None:
        """This process's writer keeps its log while it appends: once a rollover merged all
        of it, the writer moves to a new log and the merged one is deleted."""
        high = self._table.committed().high_water
        key = self._journals.release_log(high)
        if key is not None:
            delete_merged_logs(self._store, [key], high, self._logs)
