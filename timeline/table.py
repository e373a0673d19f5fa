"""A table on any repository URI: data files whose visibility the timeline decides.

`Table` is where a table object is put together: its timeline store (commit log plus
instant states), the active-timeline loader told what archival removed (`archive`), and the
hooks run after each commit (`post_commit`). Both default from the settings when the table
is opened; nothing below it (loader, transaction, commit) imports the archive package.

Its public surface is the data operations and what a reader asks; the table services are on
`table.maintenance` (maintenance.py) and what the object knows of its instants on
`table.instants` (table_instants.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from storage import Conflict, ObjectStore

from . import crash
from .active import Timeline
from .archive.hook import post_commit_hooks
from .archive.view import archived_log
from .entry_cache import EntryCache
from .errors import InstantNotFound, TimelineError
from .hooks import PostCommitHook
from .instant import (
    COMMIT,
    REPLACE_COMMIT,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    InstantTimeGenerator,
    State,
    parse_as_of,
)
from .keyed import operations as keyed_ops
from .keyed.keys import integer_key_column, keyed_files_check
from .keyed.operations import UNREAD, KeyedCompaction, KeyedTableMethods
from .keyed.properties import KeyedProperties
from .keyed.read.slices import READ_PARALLELISM, read_slices
from .layout import data_key
from .loader import ActiveView, ArchiveSource, fold_state
from .maintenance import Maintenance
from .metadata import DataFile, Entry, encode_plan
from .naming import unkeyed_naming
from .parquet_io import read_files
from .recovery import handle_failed_writes
from .schema import no_rows
from .services import cleaned_files_read_at
from .settings import EAGER, TableSettings
from .snapshot import Snapshot, TableState
from .store import Listing, TimelineStore
from .table_context import CommitCheck
from .table_instants import TableInstants
from .table_schema import latest_schema
from .txn import Transaction
from .writes import delete_partition, write

log = logging.getLogger("flowledger.timeline")

if TYPE_CHECKING:
    from pathlib import Path


#: How old (seconds) the last instants listing may be for the failed-writes check to reuse it.
FRESH_LISTING_S = 1.0


class Table(KeyedTableMethods):
    def __init__(
        self,
        store: ObjectStore,
        settings: TableSettings | None = None,
        *,
        archive: ArchiveSource | None = archived_log,
        post_commit: Sequence[PostCommitHook] | None = None,
    ) -> None:
        """`archive` reads what archival removed (None: a loader that ignores archival);
        `post_commit` replaces the hooks the settings choose (automatic archival)."""
        self.store = store
        self.settings = settings or TableSettings()
        disk = EntryCache(store.identity) if self.settings.local_entry_cache else None
        self.tl = TimelineStore(store, disk=disk)
        #: The instants this object knows and how it learns more (table_instants.py).
        self.instants = TableInstants(self.tl, archive, self._run_hooks)
        #: Run in order after each completed instant (see hooks.py).
        self.post_commit: list[PostCommitHook] = (
            list(post_commit)
            if post_commit is not None
            else post_commit_hooks(self.settings.archival)
        )
        #: Asked before each write's metadata is written (table_context.py): keyed tables' rows
        #: must carry their meta columns.
        self.commit_checks: list[CommitCheck] = [keyed_files_check]
        self.times = InstantTimeGenerator()
        self._checked_failed_at: float | None = None
        self._props: Any = UNREAD  # KeyedProperties | None once read (they never change)
        self._naming: str | None = None  # an unkeyed table's partition naming, once read
        #: Compactions this object started in the background (`compaction_mode` async);
        #: `timeline.keyed.compaction.service.wait_async` joins them.
        self.background: list[threading.Thread] = []
        #: The table services (clean, cluster, compact, rollback, ...): maintenance.py.
        self.maintenance = Maintenance(self, KeyedCompaction(self))

    @classmethod
    def open(
        cls,
        store: ObjectStore,
        settings: TableSettings | None = None,
        *,
        archive: ArchiveSource | None = archived_log,
        post_commit: Sequence[PostCommitHook] | None = None,
    ) -> Table:
        """LIST the instants; the rest of a load (log probe, archive manifest) waits until a
        read needs it. A write needs neither while the listing shows no pending instant (see
        `TableInstants.planning_timeline`), so a fresh process's commit skips both."""
        table = cls(store, settings, archive=archive, post_commit=post_commit)
        table.instants.load()
        return table

    @classmethod
    def create(
        cls,
        store: ObjectStore,
        properties: KeyedProperties | None = None,
        settings: TableSettings | None = None,
        *,
        archive: ArchiveSource | None = archived_log,
        post_commit: Sequence[PostCommitHook] | None = None,
    ) -> Table:
        """Open a table, making it keyed with `properties` (a create-only object; a new table
        also gets a creation commit stating the meta columns). Creating an existing keyed
        table again with the same properties is a no-op, with different ones an error."""
        table = cls.open(store, settings, archive=archive, post_commit=post_commit)
        if properties is not None:
            make_keyed(table, properties)
        return table

    @property
    def uri(self) -> str:
        return self.store.uri

    # -- loading --------------------------------------------------------------------------------
    def _run_hooks(self, entry: Entry) -> None:
        for hook in self.post_commit:
            hook(self, entry)

    def refresh(self) -> Listing:
        """Reload the instants (see `TableInstants.refresh`)."""
        return self.instants.refresh()

    def _loaded(self, refresh: bool) -> ActiveView:
        return self.instants.view(refresh)

    def timeline(self, refresh: bool = True) -> Timeline:
        """The active timeline (latest state per instant; completions found in the log count)."""
        return self._loaded(refresh).timeline

    def state(self, refresh: bool = True) -> TableState:
        return fold_state(self.tl, self._loaded(refresh))

    def entry(self, instant_time: str) -> Entry:
        """The commit metadata of a completed instant."""
        i = self.timeline().completed().get(instant_time)
        if i is None:
            raise InstantNotFound(f"no completed instant {instant_time} in {self.uri}")
        return self.tl.entry_of(i)

    # -- reading --------------------------------------------------------------------------------
    def snapshot(self, as_of: str | None = None, refresh: bool = True) -> Snapshot:
        """Files of completed commits minus replaced ones, from metadata (never listing data)."""
        return self._snapshot(self.state(refresh), as_of)

    def _snapshot(self, st: TableState, as_of: str | None) -> Snapshot:
        if as_of is None:
            return st.snapshot()
        as_of = parse_as_of(as_of)
        seq = st.seq_as_of(as_of)
        # Below the clean's retained position a snapshot may, not must, read cleaned files
        # (a rollback can bring an older snapshot back as the latest): refuse only if it does.
        if (
            0 < seq < st.cleaned_before_seq()
            and as_of not in st.savepoints
            and cleaned_files_read_at(st, seq)
        ):
            raise TimelineError(
                f"time travel to {as_of} in {self.uri}: its files were cleaned "
                f"({st.retention()}; savepoint an instant to keep it readable)"
            )
        if seq == 0:
            first = min(st.writes, default=None)
            raise InstantNotFound(
                f"time travel to {as_of} in {self.uri}: no commit at or before it "
                + (f"(the first is {first})" if first else "(the table has no commits)")
            )
        return st.snapshot(seq)

    def read(
        self,
        as_of: str | None = None,
        columns: Sequence[str] | None = None,
        *,
        read_optimized: bool = False,
    ) -> pa.Table:
        """The snapshot's rows in the table's schema as of that snapshot (older files are
        widened and get nulls for columns added after them). On a merge-on-read table the
        base files are merged with their logs, unless `read_optimized` (Hudi's
        read-optimized query: base files only, changes still in logs are not seen)."""
        st = self.state()
        snap = self._snapshot(st, as_of)
        schema = st.schema(snap.seq) if snap.seq else None
        if not read_optimized and st.is_merge_on_read():
            slices = st.latest_slices(snap.seq)
            ordered = sorted(slices.values(), key=lambda sl: sl.base.path)
            key_col = integer_key_column(self.properties, schema)
            merged = read_slices(self.store, ordered, schema, columns, key_col=key_col)
            return merged if merged is not None else no_rows(schema, columns)
        table = read_files(self.store, snap.files, columns, schema, parallelism=READ_PARALLELISM)
        return table if table is not None else no_rows(schema, columns)

    def schema(self, as_of: str | None = None) -> pa.Schema | None:
        """The table's schema (as of an instant) as its commits state it; None if none does."""
        st = self.state()
        return st.schema(self._snapshot(st, as_of).seq if as_of else None)

    # -- writing --------------------------------------------------------------------------------
    def partition_naming(self) -> str:
        """How this table's writes name partitions (`timeline.partitioning`): a keyed table's
        properties say; an unkeyed table's is recorded at its first partitioned write
        (`timeline.naming`). Read once per table object: it never changes."""
        props = self.properties
        if props is not None:
            return props.partition_naming
        if self._naming is None:
            self._naming = unkeyed_naming(self.store, self.state)
        return self._naming

    def data_key(self, partition: str, name: str, *, instant_time: str) -> str:
        return data_key(instant_time, partition, name)

    def begin(
        self,
        action: str = COMMIT,
        *,
        operation: str | None = None,
        plan: Mapping[str, Any] | None = None,
        instant_time: str | None = None,
    ) -> Transaction:
        """Create the requested (with `plan`) and inflight objects of a new instant."""
        # Read before `requested` exists: rollbacks of it come later.
        base = self.instants.latest_seq
        t = instant_time or self.times.new()
        body = encode_plan(
            {
                "writer": self.settings.writer_id,
                "nonce": uuid.uuid4().hex,
                "base": base,
                **(plan or {}),
            }
        )
        first_state = State.INFLIGHT if action == SAVEPOINT else State.REQUESTED
        for _ in range(1000):
            inst = Instant(t, action, first_state)
            try:
                self.tl.states.create(inst, body)
            except Conflict:
                if instant_time is not None:
                    raise
                t = self.times.after(t)
                continue
            crash.point(f"{action}.{first_state.value}")
            try:
                clash = [
                    i
                    for i in self.tl.states.of_time(t)  # a short LIST of this instant time's
                    if i.action != action and SAVEPOINT not in (i.action, action)
                ]
            except BaseException:
                self._discard_unstarted(inst)
                raise
            if not clash:
                break
            self.tl.states.delete([inst])  # same time, other action: take the next time
            if instant_time is not None:
                raise TimelineError(f"instant time {t} is taken by {clash[0]}")
            t = self.times.after(t)
        else:
            raise TimelineError(f"could not find a free instant time in {self.uri}")
        try:
            if action in WRITE_ACTIONS:  # Hudi cleans failed writes when a write starts
                self._check_failed_writes(exclude=t)
            self.instants.began(t)  # the listing predates it: not fresh for the next begin
            if first_state is State.REQUESTED:
                with contextlib.suppress(Conflict):  # someone finishing our plan got there first
                    self.tl.states.create(Instant(t, action, State.INFLIGHT), body)
                crash.point(f"{action}.inflight")
            return Transaction(self, t, action, base, operation or _default_operation(action))
        except BaseException:
            self._discard_unstarted(inst)
            raise

    def _discard_unstarted(self, inst: Instant) -> None:
        """A write that failed before it had a transaction (nothing written but its states):
        roll it back at once, rather than leave it pending until its heartbeat expires. Best
        effort: what a failing store keeps is rolled back by that expiry as before."""
        self.instants.discard(inst.time)
        try:
            self.tl.states.delete_pending(inst)
        except Exception as exc:  # the original error is the one to report
            log.warning("timeline: could not roll back %s at once: %s", inst, exc)

    def _check_failed_writes(self, exclude: str) -> None:
        """EAGER: at every write start. LAZY: at most once per heartbeat interval per table
        object, since nothing can expire faster (keeps the full LIST off most commits)."""
        now = time.monotonic()
        eager = self.settings.failed_writes_cleaner_policy == EAGER
        interval = self.settings.heartbeat_interval_ms / 1e3
        last = self._checked_failed_at
        if not eager and last is not None and now - last < interval:
            return
        self._checked_failed_at = now
        # A listing made within the last second (Table.open just before a write, as every CLI
        # commit does) is as good as a new one: nothing in it can have expired since, and an
        # instant begun after it is not a failed write yet. Saves a LIST per CLI commit.
        listing = self.instants.fresh_listing(FRESH_LISTING_S) or self.instants.load()
        handle_failed_writes(self, listing, exclude)

    def write(
        self,
        data: pa.Table | Sequence[str | Path],
        mode: str = "append",
        partition_by: Sequence[str] | str | None = None,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> Instant:
        """Write a pyarrow table or Parquet files as one commit (append) or replacecommit
        (overwrite: insert_overwrite of the partitions written, or of the whole table)."""
        if self._props is UNREAD:  # no request for an unkeyed table: the schema tells
            keyed = keyed_ops.is_keyed_schema(latest_schema(self, refresh=False))
        else:
            keyed = self._props is not None
        if keyed:
            props = self._keyed("write")
            return keyed_ops.write(self, props, data, mode, partition_by, extra_metadata)
        return write(self, data, mode, partition_by, extra_metadata)

    def delete_partition(self, partitions: Sequence[str]) -> Instant:
        return delete_partition(self, partitions)

    def files(self) -> tuple[DataFile, ...]:
        return self.snapshot().files


def make_keyed(table: Table, properties: KeyedProperties) -> KeyedProperties:
    """Make the open `table` keyed with `properties`, as `Table.create` does, on this handle
    and its listing (a caller that opened a table and found it new does not open it again):
    the properties object (create-only) and, for a new table, its creation commit. The same
    properties again are a no-op; other ones, or a table holding unkeyed commits, are
    refused (`PropertiesError`)."""
    props = keyed_ops.create(table, properties)
    table._props = props
    return props


def _default_operation(action: str) -> str:
    return {COMMIT: "insert", REPLACE_COMMIT: "insert_overwrite"}.get(action, action)
