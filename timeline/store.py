"""A table's timeline on the object store: the commit log plus the instant-state store.

`TimelineStore` joins the two (commit_log.py, instant_states.py) where a read needs both:
an instant's metadata comes from its completed object, else from the log; the listing of
the instants folder finds the log positions a rollback or restore undid. Bodies are cached
by log position (an entry at a given position never changes).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from storage import Conflict, NotFound, ObjectStore

from .active import Timeline, latest_states
from .commit_log import CommitLog, ObjectStoreLog
from .entry_cache import EntryCache
from .instant import RESTORE, ROLLBACK, Instant, State, parse_name
from .instant_states import InstantStates
from .metadata import Entry


@dataclass(frozen=True)
class Listing:
    """One load of the instants folder: latest states, when each was last touched, max seq."""

    timeline: Timeline
    touched: dict[tuple[str, str], datetime]
    objects: tuple[Instant, ...]
    max_seq: int
    #: List the log after this position to find every completion without a completed object.
    scan_from: int
    #: Positions whose completion is accounted for (completed object, or undone by a logged
    #: rollback/restore whose completed object exists).
    present: frozenset[int]


class TimelineStore:
    def __init__(
        self, store: ObjectStore, log: CommitLog | None = None, disk: EntryCache | None = None
    ) -> None:
        self.store = store
        self.log: CommitLog = log if log is not None else ObjectStoreLog(store)
        self.states = InstantStates(store)
        #: Entries this machine wrote, for the next process (entry_cache.py); None = none.
        self.disk = disk

    def list_instants(self) -> Listing:
        """Paged LIST of the instants folder; states and order come from names alone."""
        objs = self.states.list_states()
        touched: dict[tuple[str, str], datetime] = {}
        for i, mtime in objs:
            if mtime is not None:
                k = (i.time, i.action)
                touched[k] = max(touched.get(k, mtime), mtime)
        instants = [i for i, _ in objs]
        seqs = {i.seq for i in instants if i.seq is not None}
        present = set(seqs)
        for i in instants:  # completed objects a rollback or restore deleted on purpose
            if i.seq is not None and i.action in (ROLLBACK, RESTORE):
                present.update(parse_name(n).seq or 0 for n in self.entry_of(i).rolled_back)
        top = max(seqs, default=0)
        scan_from = top
        if seqs:  # a hole below the newest completed object: a completion not written yet
            hole = next((s for s in range(1, top) if s not in present), None)
            if hole is not None:
                scan_from = hole - 1
        return Listing(
            Timeline(latest_states(instants)),
            touched,
            tuple(instants),
            top,
            scan_from,
            frozenset(present),
        )

    # -- entry bodies ---------------------------------------------------------------------------
    def entry_of(self, instant: Instant) -> Entry:
        """The metadata of a completed instant (from its completed object, else the log)."""
        assert instant.seq is not None
        cached = self.log.cached(instant.seq)
        if cached is None and self.disk is not None:
            cached = self.disk.get(instant)
            if cached is not None:
                self.log.remember(cached)
        if cached is not None:
            return cached
        try:
            data = self.states.read(instant)
        except NotFound:
            return self.log.entry(instant.seq)
        e = Entry.decode(data, self.states.url(instant))
        self.log.remember(e)
        return e

    def entries_of(self, instants: list[Instant]) -> list[Entry]:
        """Metadata of many completed instants; uncached bodies are fetched in parallel
        (a cold reader pays one GET per completed instant, but not one round trip each)."""
        missing = [i for i in instants if i.seq is None or self.log.cached(i.seq) is None]
        if len(missing) > 1:
            with ThreadPoolExecutor(min(16, len(missing)), "flowledger-entry-read") as pool:
                list(pool.map(self.entry_of, missing))
        return [self.entry_of(i) for i in instants]

    def completed_instant(self, e: Entry) -> Instant:
        return Instant(e.time, e.action, State.COMPLETED, e.seq)

    def write_completed(self, e: Entry) -> None:
        """Materialize a completion as the completed instant object (idempotent)."""
        with contextlib.suppress(Conflict):  # a helper wrote the same bytes first
            self.states.create(self.completed_instant(e), e.encode())
        if self.disk is not None:
            self.disk.put(e)


__all__ = ["Listing", "TimelineStore"]
