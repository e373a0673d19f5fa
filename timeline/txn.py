"""A transaction: one instant from requested to completed (or rolled back by its writer)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import pyarrow as pa

from storage import Finishing, StorageError

from .commit import complete, completion_point, materialize
from .errors import CommitConflict, TimelineError
from .heartbeat import Heartbeat
from .instant import REPLACE_COMMIT, Instant, State
from .layout import data_key, data_prefix, heartbeat_key
from .metadata import DataFile, Entry, write_metadata
from .schema import SCHEMA_KEY, schema_to_json
from .table_context import TableContext


class WritableTable(TableContext, Protocol):
    """A table context one can begin an instant on."""

    def begin(
        self,
        action: str = ...,
        *,
        operation: str | None = None,
        plan: Mapping[str, Any] | None = None,
        instant_time: str | None = None,
    ) -> Transaction: ...


class Transaction(Finishing):
    """Created by `Table.begin`: the requested and inflight objects exist, a heartbeat runs."""

    def __init__(
        self, table: TableContext, instant_time: str, action: str, base: int, operation: str
    ) -> None:
        self.table = table
        self.instant_time = instant_time
        self.action = action
        self.base = base  # log position the writer's view was read at (validated after it)
        self.operation = operation
        self._added: list[DataFile] = []
        self._replaced: dict[str, DataFile] = {}
        self._replaced_partitions: set[str] = set()
        self._done = False
        #: The completing log write was attempted: from here on a failure may have landed.
        self.completing = False
        #: The table's schema after this write (see schema.check_schema); recorded at commit.
        self.schema: pa.Schema | None = None
        self._heartbeat = Heartbeat(
            table.store,
            instant_time,
            table.settings.writer_id,
            table.settings.heartbeat_interval_ms / 1000.0,
        ).start()

    # -- building the write -------------------------------------------------------------------
    @property
    def instant(self) -> Instant:
        return Instant(self.instant_time, self.action, State.INFLIGHT)

    def data_key(self, partition: str = "", name: str = "") -> str:
        """A key for a new data file of this instant (rollback finds it by its prefix)."""
        if not name:
            raise ValueError("data_key needs a file name")
        return data_key(self.instant_time, partition, name)

    def add(self, *files: DataFile) -> None:
        prefix = data_prefix(self.instant_time)
        for f in files:
            if not f.path.startswith(prefix):
                raise TimelineError(
                    f"data file {f.path!r} is not under this instant's prefix {prefix!r}; "
                    "write it at txn.data_key(partition, name)"
                )
            self._added.append(f)

    def replace(self, files: Iterable[str | DataFile]) -> None:
        """Mark files of the current snapshot as replaced by this commit (replacecommit)."""
        if self.action != REPLACE_COMMIT:
            raise TimelineError(
                f"instant {self.instant_time} is a {self.action}: files can only be replaced "
                "by a replacecommit (begin(action='replacecommit'))"
            )
        current = {f.path: f for f in self.table.snapshot().files}
        for f in files:
            path = f if isinstance(f, str) else f.path
            found = current.get(path)
            if found is None:
                raise TimelineError(f"cannot replace {path!r}: not in the table's snapshot")
            self._replaced[path] = found

    def replace_partitions(self, partitions: Iterable[str]) -> None:
        """Overwrite whole partitions: their current files are replaced (insert_overwrite)."""
        parts = set(partitions)
        self.replace(f for f in self.table.snapshot().files if f.partition in parts)
        self._replaced_partitions |= parts

    # -- completion -----------------------------------------------------------------------------
    def commit(
        self,
        extra_metadata: Mapping[str, str] | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Instant:
        """`details`: further commit-metadata fields (JSON) beside the files, e.g. the
        per-file write stats of a keyed write; they cannot replace the standard fields."""
        self._check_files()
        metadata = write_metadata(
            self.operation,
            self._added,
            self._replaced.values(),
            self._replaced_partitions,
            extra_metadata,
        )
        for k, v in (details or {}).items():
            if k in metadata or k == SCHEMA_KEY:
                raise TimelineError(f"commit detail {k!r} would replace a standard field")
            metadata[k] = v
        if self.schema is not None:
            metadata[SCHEMA_KEY] = schema_to_json(self.schema)
        return self.complete(metadata)

    def _check_files(self) -> None:
        """The table's commit checks (a keyed table's: its rows carry the meta columns)."""
        for check in self.table.commit_checks:
            problem = check(self.schema, self._added)
            if problem is not None:
                self.abort()
                raise TimelineError(f"{self.table.uri} {problem}")

    def complete(self, metadata: Mapping[str, Any]) -> Instant:
        if self._done:
            raise TimelineError(f"instant {self.instant_time} is already finished")
        intent = Entry(
            -1, self.instant_time, self.action, self.table.settings.writer_id, dict(metadata)
        )
        self.completing = True
        try:
            entry = complete(
                self.table.tl.log,
                intent,
                self.base,
                self.table.instants.latest_seq,
                self.table.settings.commit_max_attempts,
            )
        except CommitConflict:
            self.abort()
            raise
        except BaseException:
            # Left pending (StorageError, CommitUnknownOutcome, interrupts): it may have
            # landed. Reopening tells (the log is the truth); if it did not, the expired
            # heartbeat gets it rolled back. So a caller's abort() (an `except` or `with`
            # around the write) must not delete files a landed completion names.
            self._done = True
            self._heartbeat.stop()
            raise
        self._done = True
        try:
            materialize(self.table.tl, entry)
        except StorageError:
            # Completed at the log write already: readers find it in the log tail, and the
            # next recovery writes the completed object (and finishes side effects).
            pass
        finally:
            self._heartbeat.stop()
        completion_point(self.action, self.operation, "completed")
        self.table.instants.committed(entry)  # notes it and runs the table's post-commit hooks
        return self.table.tl.completed_instant(entry)

    def abort(self) -> None:
        """Roll back this write eagerly: delete its data files, then its pending states."""
        if self._done:
            return
        self._done = True
        self._heartbeat.stop()
        store = self.table.store
        store.delete_many([o.key for o in store.list(data_prefix(self.instant_time))])
        store.delete(heartbeat_key(self.instant_time))
        tl = self.table.tl
        mine = [i for i in tl.states.of_time(self.instant_time) if i.is_pending]
        tl.states.delete(sorted(mine, key=lambda i: -i.state.rank))

    def detach(self) -> None:
        """Stop heartbeating and leave the instant pending for another process to complete or
        abort (a Spark data source plans in one Python worker and commits in another): it
        rebuilds `Transaction(table, instant_time, action, base, operation)`."""
        self._heartbeat.stop()

    def exit_ok(self) -> None:
        if not self._done:
            self.commit()

    def exit_failed(self) -> None:
        self.abort()
