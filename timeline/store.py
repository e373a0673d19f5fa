"""Timeline objects on the object store: instant states, the commit log, entry bodies.

Reads of immutable bodies are cached (an entry at a given seq never changes).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from storage import Conflict, NotFound, ObjectStore, UnknownOutcome

from .active import Timeline, latest_states
from .errors import CommitOutcomeUnknown, InvalidInstant
from .instant import RESTORE, ROLLBACK, Instant, State, parse_name
from .layout import INSTANTS, LOG, instant_key, instant_prefix, log_key, log_seq
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
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._entries: dict[int, Entry] = {}
        #: Positions at or below this are archived (set by an archiver; see the protocol doc).
        self.floor = 0

    # -- instant state objects ------------------------------------------------------------------
    def create(self, instant: Instant, body: bytes) -> None:
        """Create-only PUT of one state object (Conflict if it exists)."""
        self.store.put_if_absent(instant_key(instant), body)

    def read_state(self, instant: Instant) -> bytes:
        return self.store.get(instant_key(instant))

    def delete_states(self, instants: Iterable[Instant]) -> None:
        for i in instants:  # newest state first, so a crash leaves an earlier state behind
            self.store.delete(instant_key(i))

    def list_objects(self, prefix: str = INSTANTS) -> list[tuple[Instant, datetime | None]]:
        out = []
        for obj in self.store.list(prefix):
            try:
                out.append((parse_name(obj.key[len(INSTANTS) :]), obj.last_modified))
            except InvalidInstant:
                continue  # not ours (e.g. an editor's temp file)
        return out

    def list_instants(self) -> Listing:
        """Paged LIST of the instants folder; states and order come from names alone."""
        objs = self.list_objects()
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
            hole = next((s for s in range(self.floor + 1, top) if s not in present), None)
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

    def states_of(self, time: str) -> list[Instant]:
        return [i for i, _ in self.list_objects(instant_prefix(time))]

    # -- the commit log -------------------------------------------------------------------------
    def log_after(self, seq: int) -> list[int]:
        """Positions taken after `seq` (a short LIST from a known position)."""
        start = log_key(seq) if seq > 0 else None
        return [log_seq(o.key) for o in self.store.list(LOG, start_after=start)]

    def entry(self, seq: int) -> Entry:
        with self._lock:
            cached = self._entries.get(seq)
        if cached is not None:
            return cached
        data = self.store.get(log_key(seq))
        e = Entry.decode(data, self.store.url(log_key(seq)))
        self.remember(e)
        return e

    def entry_of(self, instant: Instant) -> Entry:
        """The metadata of a completed instant (from its completed object, else the log)."""
        assert instant.seq is not None
        with self._lock:
            cached = self._entries.get(instant.seq)
        if cached is not None:
            return cached
        try:
            data = self.store.get(instant_key(instant))
        except NotFound:
            return self.entry(instant.seq)
        e = Entry.decode(data, self.store.url(instant_key(instant)))
        self.remember(e)
        return e

    def entries_of(self, instants: list[Instant]) -> list[Entry]:
        """Metadata of many completed instants; uncached bodies are fetched in parallel
        (a cold reader pays one GET per completed instant, but not one round trip each)."""
        with self._lock:
            missing = [i for i in instants if i.seq not in self._entries]
        if len(missing) > 1:
            with ThreadPoolExecutor(min(16, len(missing))) as pool:
                list(pool.map(self.entry_of, missing))
        return [self.entry_of(i) for i in instants]

    def remember(self, e: Entry) -> None:
        with self._lock:
            self._entries[e.seq] = e

    def forget(self, seq: int) -> None:
        with self._lock:
            self._entries.pop(seq, None)

    def take(self, entry: Entry) -> bool:
        """Create-only PUT of log position `entry.seq`. True = ours, False = someone else's.

        An unknown outcome is resolved by reading the position back and checking that it
        names this instant and writer (bodies are unique per writer and instant)."""
        body = entry.encode()
        key = log_key(entry.seq)
        for _ in range(3):
            try:
                self.store.put_if_absent(key, body)
                self.remember(entry)
                return True
            except Conflict:
                return self._owned(key, body, entry)  # the winner's entry is now cached
            except UnknownOutcome:
                try:
                    return self._owned(key, body, entry)
                except NotFound:
                    continue  # it did not land: a create-only retry is safe
                except UnknownOutcome:
                    continue
        raise CommitOutcomeUnknown(
            f"commit of instant {entry.time} at {self.store.url(key)}: the write's outcome is "
            "unknown and reading back failed; reopen the table to see whether it completed",
            entry.time,
        )

    def _owned(self, key: str, body: bytes, entry: Entry) -> bool:
        data = self.store.get(key)
        if data == body:
            self.remember(entry)
            return True
        self.remember(Entry.decode(data, self.store.url(key)))
        return False

    def completed_instant(self, e: Entry) -> Instant:
        return Instant(e.time, e.action, State.COMPLETED, e.seq)

    def write_completed(self, e: Entry) -> None:
        """Materialize a completion as the completed instant object (idempotent)."""
        with contextlib.suppress(Conflict):  # a helper wrote the same bytes first
            self.store.put_if_absent(instant_key(self.completed_instant(e)), e.encode())

    # -- raw state transitions (Hudi's HoodieActiveTimeline revert/delete operations) ----------
    def revert_to_inflight(self, instant: Instant) -> Instant:
        """Delete a completed state object: the instant is inflight again. Raw operation: a
        completion also recorded in the log is undone only by a logged rollback or restore."""
        if not instant.is_completed:
            raise InvalidInstant(f"{instant} is not completed")
        self.store.delete(instant_key(instant))
        return instant.with_state(State.INFLIGHT)

    def revert_inflight_to_requested(self, instant: Instant) -> Instant:
        if instant.state is not State.INFLIGHT:
            raise InvalidInstant(f"{instant} is not inflight")
        self.store.delete(instant_key(instant))
        return instant.with_state(State.REQUESTED)

    def delete_pending(self, instant: Instant) -> None:
        """Delete every pending state object of an instant (inflight first)."""
        if instant.is_completed:
            raise InvalidInstant(f"{instant} is completed, not pending")
        self.delete_states(
            [instant.with_state(State.INFLIGHT), instant.with_state(State.REQUESTED)]
        )
