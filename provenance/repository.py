"""`ProvenanceRepository`: register events, read them back, roll over, expire, recover."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from storage import Closing, NotFound, ObjectStore, ProgressCallback

from . import holes, staging
from . import sql as sqlmod
from .catalog import Snapshot
from .errors import EventNotFound
from .event import ProvenanceEvent
from .expiry import ExpiryPlan, expire, plan_for
from .freshness import SnapshotCache
from .ids import IdAllocator
from .journal import JournalWriter
from .journal_cache import JournalCache
from .journal_listing import JournalListing
from .journal_logs import LogIndex
from .journal_terms import JournalTerms
from .layout import JournalRef
from .lineage import Lineage
from .lineage_queries import children_of, lineage_of, parents_of
from .maintenance import Backlog, start_thread
from .objects import ParquetSource, cache_root
from .query import Query
from .records import to_table
from .reingest import count_present
from .rollover import RolloverResult, delete_merged_journals, list_journals
from .rollovers import Rollovers
from .schema import conform, rows_to_events
from .search import EventReader
from .settings import ProvenanceSettings
from .snapshot_loader import SnapshotLoader
from .table import ProvenanceTable
from .unmerged import unmerged_events

log = logging.getLogger("flowledger.provenance")
PREFIX = "provenance"


class ProvenanceRepository(Closing):
    """NiFi's provenance repository on an object store (see docs/provenance.md).

    `store` is the repository root; everything lives under `provenance/`. Open it with
    `ProvenanceRepository.open(store)` (construct, read the table, `recover()`); the
    constructor alone makes no request and starts no thread.
    """

    def __init__(
        self,
        store: ObjectStore,
        settings: ProvenanceSettings | None = None,
        *,
        background: bool | None = None,
    ) -> None:
        """`background`: run the maintenance thread (flush buffered journals within
        `journal_flush_interval_s`, roll over by `rollover_time_s`/`rollover_size`). True
        starts it in `open()` (or with the first write), None (the default) with the first
        write, so a long-running writer maintains the repository on its own while a reader
        starts no thread; False never starts it."""
        self.settings = settings or ProvenanceSettings()
        self.root = store
        self.store = store.scoped(PREFIX)
        self.table = ProvenanceTable(self.store, self.settings.table)
        self.ids = IdAllocator(self.store, self._recover_next_id)
        self._backlog = Backlog()
        self.journals = JournalWriter(
            self.store,
            self.ids,
            self.settings.journal_count,
            self.settings.journal_max_events,
            self.settings.journal_compression,
            self._written,
            self.settings.journal_sync_wait_s,
            lambda table: self.journal_terms.filter_of(table),
            self.settings.journal_log_bytes,
        )
        self.source = ParquetSource(self.store, cache_root(self.settings.cache_dir, self.store))
        #: Staged ingests' manifests, each read once (they never change).
        self._manifests = staging.Manifests()
        self._journal_cache = JournalCache(self._read_journal)
        #: The blocks of append-only journal logs read so far (local backend).
        self._logs = LogIndex()
        self.listing = JournalListing(self.store, self._manifests, self._logs)
        fields = (
            *self.settings.indexed_fields,
            *(f"attr.{a}" for a in self.settings.indexed_attributes),
        )
        self.journal_terms = JournalTerms(fields)
        self._loader = SnapshotLoader(
            self.table,
            self.listing,
            self.journal_terms,
            lambda high, refs: self._verify_complete(high, refs, tail=False),
        )
        self._snapshots = SnapshotCache(self._loader.load)
        self.reader = EventReader(
            self.source,
            self._load_journal,
            fields,
            self.settings.query_threads,
            self.settings.row_group_events,
            lambda journals, q: self.journal_terms.select(journals, q, self._load_journal),
        )
        self._rollovers = Rollovers(
            self.root,
            self.store,
            self.table,
            self.settings,
            (self._backlog, self.journals, self._logs, self._manifests, self._snapshots),
            lambda high, refs: self._verify_complete(high, refs, tail=True),
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._auto_background = background is not False

    @classmethod
    def open(
        cls,
        store: ObjectStore,
        settings: ProvenanceSettings | None = None,
        *,
        recover: bool = True,
        background: bool | None = None,
    ) -> ProvenanceRepository:
        """Construct, read the provenance table, then `recover()` (NiFi's restart recovery).

        `recover=False` is for readers that must not change the repository (queries, Spark
        tasks, a second process next to a writer): nothing is rolled back or rolled over.
        `background=True` starts the maintenance thread now (see the constructor)."""
        repo = cls(store, settings, background=background)
        repo.table.load()
        if recover:
            repo.recover()
        if background:
            repo._start_background()
        return repo

    def _start_background(self) -> None:
        with self._backlog.lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = start_thread(
                self,
                ProvenanceRepository._maintain_once,  # type: ignore[arg-type]
                self._stop,
                self.settings.journal_flush_interval_s,
            )

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.journals.flush()
        finally:
            self.journals.close()
        self.ids.confirm()  # this process's last objects landed: no longer open allocations
        self.reader.close()
        self._loader.close()

    def recover(self) -> int:
        """NiFi's restart recovery: drop journals an interrupted rollover already merged,
        then finish pending rollovers. Returns the journals deleted.

        A rollover killed before its commit left a pending instant: the timeline rolls it back
        (deleting its files) once its heartbeat has expired; until then it is invisible."""
        self.table.recover()
        self._snapshots.invalidate()
        high = self.table.committed(fresh=True).high_water
        self._check_allocator()
        deleted = delete_merged_journals(self.store, high, self._manifests)
        live = list_journals(self.store, high, self._manifests, self._logs)
        self.ids.settle(holes.object_ranges(live), high)
        self._verify_complete(high, [ref for ref, _ in live], tail=True)
        for ref, _ in live:
            self._flushed(ref)
        staging.clean_staging(
            self.store,
            {i for ref, _ in live if (i := staging.ingest_of(ref))},
            self.settings.staging_timeout_s,
        )
        if self._backlog:
            self.rollover()
        return deleted

    def _recover_next_id(self) -> int:
        """Past every event the repository holds or held: committed files, unmerged journals,
        and the high-water mark (which survives the expiry of every file)."""
        # Not checked for missing objects: the allocator asks this while it is being read.
        snap = self._loader.load(verify=False)
        return max(snap.max_event_id + 1, snap.high_water)

    def _verify_complete(self, high: int, refs: Sequence[JournalRef], *, tail: bool) -> None:
        """`MissingEvents` if a committed journal or manifest is gone (see holes.py)."""
        holes.verify_complete(
            self.store,
            self.ids,
            high,
            refs,
            lambda: holes.relist(self.store, self.table, high, self._manifests),
            tail=tail,
        )

    def accept_missing(self, first: int, end: int) -> None:
        """Accept the loss of events [first, end) reported by `MissingEvents` (their object
        is gone and no backup will restore it): the hole becomes an honest one, which the
        next rollover skips after `journal_gap_timeout_s`. Open the repository with
        `recover=False` to call this (recovery stops at the hole)."""
        self.ids.accept_lost(first, end)
        self._snapshots.invalidate()

    def _check_allocator(self) -> None:
        """Start-up check (see IdAllocator.check_against)."""
        self.ids.check_against(self._recover_next_id())

    def _maintain_once(self) -> None:
        """One round of the maintenance thread: NiFi's flush and rollover by time/size."""
        try:
            self.journals.flush(older_than=self.settings.journal_flush_interval_s)
            if self._backlog.due(self.settings):
                self.rollover()
        except Exception:  # keep maintaining; the next round retries
            log.exception("provenance: background flush/rollover failed")

    # -- writing ------------------------------------------------------------------------------
    def _flushed(self, ref: JournalRef) -> None:
        self._backlog.add(ref)
        self._snapshots.invalidate()  # our own write: visible to our next read at once

    def _written(self, ref: JournalRef, table: pa.Table | None, found: Any = None) -> None:
        """A journal this process flushed: searchable at once, without reading it back
        (`found`: its journal filter, computed while it was written)."""
        self.ids.landed(ref.first_id, ref.end_id)
        if table is not None:
            self.journal_terms.add(ref, table, found)
            self._journal_cache.put(ref, table)
        self._flushed(ref)

    def backlog_bytes(self) -> int:
        return self._backlog.bytes()

    def _throttle(self) -> None:
        if self._backlog.falling_behind(self.settings):
            self.rollover()

    def register_event(
        self, event: ProvenanceEvent | Mapping[str, Any], sync: bool | None = None
    ) -> list[int]:
        return self.register_events([event], sync=sync)

    def register_events(
        self, events: Iterable[ProvenanceEvent | Mapping[str, Any]], sync: bool | None = None
    ) -> list[int]:
        """Validate (all or nothing; dicts with the view's field names are type-checked and
        converted), then write to a journal. By default (`sync=None`: the setting
        `always_sync`, True) returns once the events are durable and searchable, with the ids
        they received; concurrent callers share journal flushes (group commit).
        `sync=False`: buffered, flushed to the store within `journal_flush_interval_s` by the
        maintenance thread (or when a journal is full, `flush()`, `close()`); returns []."""
        if sync is None:
            sync = self.settings.always_sync
        if sync:
            self.journals.arriving()  # a flushing writer may wait for this batch
        try:
            table = to_table(events, self.settings.max_attribute_length)
        except BaseException:
            if sync:
                self.journals.arrived()
            raise
        return self._append(table, sync, announced=sync)

    def register_table(
        self, table: pa.Table, sync: bool | None = None, *, _conformed: bool = False
    ) -> list[int]:
        """The columnar fast path: a pyarrow Table with the view's column names (`sync` as
        for `register_events`)."""
        if sync is None:
            sync = self.settings.always_sync
        if not _conformed:
            table = conform(table, self.settings.max_attribute_length)
        return self._append(table, sync, announced=False)

    def _append(self, table: pa.Table, sync: bool, announced: bool) -> list[int]:
        try:
            if self._auto_background:
                self._start_background()
            self._throttle()
            if table.num_rows == 0:
                return []
            ann, announced = announced, False  # append reports the arrival, whatever happens
            _, first = self.journals.append(table, sync, ann)
        finally:
            if announced:
                self.journals.arrived()
        if first is None:
            return []
        return list(range(first, first + table.num_rows))

    def flush(self) -> list[JournalRef]:
        return self.journals.flush()

    def register_staged(self, tables: Iterable[pa.Table]) -> staging.Committed:
        """Register tables (the view's columns, validated by `conform`) all at once: each
        table is staged as one invisible part, then one manifest makes every event visible
        together (ids taken at that point, in order). Memory holds one table at a time.
        A table failing validation aborts the whole call (nothing becomes visible)."""
        self._throttle()
        done = staging.register_staged(
            self.store,
            self.settings.journal_compression,
            self._manifests,
            self.ids,
            tables,
            lambda t: conform(t, self.settings.max_attribute_length),
        )
        for ref in done.parts:
            self._flushed(ref)
        return done

    def count_present(self, ids_file: Path, key: str, start: int, end: int) -> tuple[int, str]:
        """How many of the ids in `ids_file` (see provenance/reingest.py) some stored event has
        as `source_fields[key]`, among events with a time in [start, end] ms (files pruned by
        their time range), and one of them."""
        snap = self.snapshot(0)
        files = [f for f in snap.files if f.max_time >= start and f.min_time <= end]
        paths = [self.source.download(f.events_key) for f in files]
        journals = [self._load_journal(j) for j in snap.journals]
        return count_present(paths, journals, snap.high_water, ids_file, key, start, end)

    def unmerged_events(self, snap: Snapshot) -> pa.Table:
        """The events of `snap` still in journals (ids from its high-water mark on, so none
        is also in a committed file), in the storage schema: with `snap.files`, every event
        the SQL view `provenance` of `snap` shows."""
        return unmerged_events(snap, self._load_journal)

    # -- reading ------------------------------------------------------------------------------
    def _load_journal(self, ref: JournalRef) -> pa.Table:
        return self._journal_cache.get(ref)

    def _read_journal(self, ref: JournalRef) -> pa.Table:
        try:
            return staging.load(self.store, ref)
        except NotFound:
            self.listing.forget()  # the next snapshot lists again (and sees the hole)
            raise

    def snapshot(self, max_age_s: float | None = None) -> Snapshot:
        """What a reader sees, reused up to `max_age_s` (0: ask now; see freshness.py)."""
        return self._snapshots.get(max_age_s)[0]

    def max_event_id(self) -> int:
        """The largest event id stored (-1 for an empty repository)."""
        return self.snapshot(0).max_event_id

    def query(self, query: Query) -> list[ProvenanceEvent]:
        return rows_to_events(self.query_table(query))

    def query_table(self, query: Query) -> pa.Table:
        return self._snapshots.read(
            lambda snap: self.reader.search(snap, query),
            max_age_s=self.settings.search_snapshot_reuse_s,
        )

    def get_events(self, first_id: int, max_events: int) -> list[ProvenanceEvent]:
        snap = self.snapshot(0)  # paging to the newest event: never a reused snapshot
        rows = self.reader.get_events(snap, first_id, max_events)
        if rows.num_rows < max_events:
            # The page reaches the newest event held: a deleted object at the end of the ids
            # leaves no hole between journals, the allocator's next id shows it (one GET).
            self._verify_complete(snap.high_water, snap.journals, tail=True)
        return rows_to_events(rows)

    def get_event(self, event_id: int) -> ProvenanceEvent:
        table = self._snapshots.read(
            lambda snap: self.reader.get_event(snap, event_id), lambda t: t.num_rows == 0
        )
        found = rows_to_events(table)
        if not found:
            raise EventNotFound(
                f"no provenance event with id {event_id} (never written or expired)"
            )
        return found[0]

    def cached_event(self, event_id: int) -> ProvenanceEvent | None:
        """The event if memory alone answers (no I/O: an event loop may call it); None: call
        `get_event` (a None says nothing about the event's existence)."""
        snap = self._snapshots.peek()
        found = None if snap is None else self.reader.cached_event(snap, event_id)
        return None if found is None else rows_to_events(found)[0]

    def query_many(self, queries: Sequence[Query]) -> list[ProvenanceEvent]:
        """Events of several searches, all against one snapshot."""
        return self._snapshots.read(
            lambda snap: [e for q in queries for e in rows_to_events(self.reader.search(snap, q))],
            max_age_s=self.settings.search_snapshot_reuse_s,
        )

    # -- lineage (lineage_queries.py) ---------------------------------------------------------
    def lineage(self, flowfile_uuid: str) -> Lineage:
        return lineage_of(self, flowfile_uuid)

    def expand_parents(self, event_id: int) -> Lineage:
        return parents_of(self, event_id)

    def expand_children(self, event_id: int) -> Lineage:
        return children_of(self, event_id)

    # -- SQL ----------------------------------------------------------------------------------
    def sql_connection(
        self,
        temp_dir: Path | None = None,
        memory_limit_bytes: int | None = None,
        views: Mapping[str, sqlmod.ViewSource] | None = None,
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with the read-only view `provenance` (local copies of objects);
        `temp_dir`: DuckDB's spill folder (default a private folder in the cache);
        `memory_limit_bytes`: DuckDB's memory limit (default: DuckDB's); `views`: more
        read-only views in the same connection (local Parquet files or Arrow tables)."""
        snap = self.snapshot(0)
        # A deleted object at the end of the ids leaves no hole between journals: the
        # allocator's next id shows it (one GET).
        self._verify_complete(snap.high_water, snap.journals, tail=True)
        return sqlmod.connect_snapshot(
            snap, self.source, self._load_journal, temp_dir, memory_limit_bytes, views
        )

    def sql(self, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        con = self.sql_connection()
        try:
            return sqlmod.run(con, query)
        finally:
            con.close()

    # -- maintenance --------------------------------------------------------------------------
    def rollover(
        self, engine: str = "local", spark: Any = None, progress: ProgressCallback | None = None
    ) -> RolloverResult:
        """Merge every journal flushed so far (several files if over `rollover_size`).

        `engine="spark"` runs the merge as a PySpark job (`spark`: a SparkSession, default
        the active one): one task per chunk of `rollover_size`, one instant for all files.
        `progress` (local engine) is told the journals to merge and each one read.
        """
        if engine == "spark":
            return self._rollovers.spark(spark)
        if engine != "local":
            raise ValueError(f"unknown rollover engine {engine!r}: use 'local' or 'spark'")
        return self._rollovers.local(progress)

    def plan_expiry(self, now_ms: int | None = None) -> ExpiryPlan:
        return plan_for(self.table, self.settings, now_ms)

    def expire(
        self, now_ms: int | None = None, progress: ProgressCallback | None = None
    ) -> ExpiryPlan:
        """Expire the oldest files over `max_storage_size` / older than `max_storage_time_s`
        (see expiry.py); readers see them go at once."""
        try:
            return expire(self.table, self.settings, now_ms, progress)
        finally:
            self._snapshots.invalidate()
