"""64-bit event ids, unique and increasing across every writer process of a repository.

One small object holds the next free id. A journal flush takes exactly the ids it needs with
one compare-and-swap on it (`put_if_match`), just before writing the journal object. Ids are
therefore assigned at flush time, never leased ahead: a process that stops (cleanly or not)
holds no unused range, so ids continue after a restart without gaps. The only possible gap is
a writer dying (or failing) between its CAS and its journal PUT; rollover skips such a hole
after `journal_gap_timeout_s` (see docs/provenance.md).

So that such an honest hole can be told from a committed object that went missing, the
document also lists the *open* allocations: each CAS adds the range it takes, and the writer
removes it (in its next CAS, or one more at close) once its object landed. A hole in the ids
that no open allocation covers was written and acknowledged, so its object was deleted:
readers, rollover and recovery report it (`provenance/holes.py`) instead of skipping it.

The per-flush CAS is not made durable (`durable=False`: no fsync on the local backend): the
journal it precedes is, and a process's first allocation repairs the allocator forward from
the data (`repair`), so an allocator a machine crash moved back, truncated or lost is never
used as it is.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from storage import (
    Conflict,
    IntegrityError,
    NotFound,
    ObjectStore,
    StorageError,
    UnknownOutcome,
    read_document,
    write_document,
)

from .errors import ProvenanceUnknownOutcome
from .id_document import (
    ALLOCATOR_KEY,
    MAX_OPEN,
    UNKNOWN_WRITER,
    Allocation,
    AllocatorState,
    now_ms,
    parse_state,
)

__all__ = ["ALLOCATOR_KEY", "Allocation", "AllocatorState", "IdAllocator"]

log = logging.getLogger("flowledger.provenance")


class IdAllocator:
    def __init__(self, store: ObjectStore, recover_next: Callable[[], int]) -> None:
        self._store = store
        self._recover_next = recover_next
        self._writer = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._cached: AllocatorState | None = None  # the document as of our last CAS
        #: Ranges this process took whose object has not landed yet / landed but may still be
        #: listed as open in the document (removed by the next CAS or `confirm`).
        self._in_flight: set[tuple[int, int]] = set()
        self._landed: set[tuple[int, int]] = set()
        #: Guards those two sets; taken after `_lock` when both are held, never before it
        #: (readers ask `in_flight` while an allocation may hold `_lock`).
        self._flight = threading.Lock()
        #: The end of the last range this process took: the allocator never goes below it.
        self._high = 0
        #: Checked against the data (`repair`) since this process opened it.
        self._checked = False

    def _body(self, next_id: int, open_: Iterable[Allocation]) -> dict[str, Any]:
        # A nonce per write makes every body unique, so a retried CAS is resolved correctly.
        # Sealed with a crc32 field (write_document): a damaged allocator is never trusted.
        kept = sorted(open_, key=lambda a: a.first)[-MAX_OPEN:]
        return {
            "next_event_id": next_id,
            "writer": self._writer,
            "nonce": uuid.uuid4().hex,
            "open": [a.to_json() for a in kept],
        }

    def _cas(
        self,
        next_id: int,
        etag: str | None,
        open_: Iterable[Allocation] = (),
        durable: bool = True,
    ) -> AllocatorState:
        body = self._body(next_id, open_)
        new = write_document(self._store, ALLOCATOR_KEY, body, etag, durable=durable)
        return parse_state(body, new)

    def _without_landed(self, state: AllocatorState) -> list[Allocation]:
        """The document's open allocations minus this process's that have landed."""
        with self._flight:
            landed = set(self._landed)
        return [
            a for a in state.open if not (a.writer == self._writer and (a.first, a.end) in landed)
        ]

    def _read(self) -> AllocatorState:
        try:
            doc = read_document(self._store, ALLOCATOR_KEY)
        except NotFound:
            start = self._recover_next()
            # Lost (or never written): what happened to ids below `start` is not recorded.
            unknown = [Allocation(0, start, UNKNOWN_WRITER, now_ms())] if start > 0 else []
            with contextlib.suppress(Conflict):  # created by another writer meanwhile
                self._cas(start, None, unknown)
            # Read back rather than trust the create's answer: other writers may replace the
            # document at once, and the local backend's create reports the etag of whatever
            # is at the key when it looks, which is then paired with the wrong body.
            doc = read_document(self._store, ALLOCATOR_KEY)
        return parse_state(doc.body, doc.etag)

    def peek(self) -> int:
        """The next id that will be assigned (one GET)."""
        with self._lock:
            self._cached = self._read()
            return self._cached.next_id

    def state(self) -> AllocatorState | None:
        """The document as stored now (one GET): the next id and the open allocations; None
        if there is none (nothing allocated yet, or lost: it is re-created on allocation).
        Never writes, so a reader may ask."""
        try:
            doc = read_document(self._store, ALLOCATOR_KEY)
        except NotFound:
            return None
        return parse_state(doc.body, doc.etag)

    def in_flight(self) -> list[tuple[int, int]]:
        """Ranges this process took whose object has not landed (yet)."""
        with self._flight:
            return sorted(self._in_flight)

    def landed(self, first: int, end: int) -> None:
        """The object holding ids [first, end) is written: no longer an open allocation
        (recorded in the document by this process's next CAS, or `confirm`)."""
        with self._flight:
            if (first, end) in self._in_flight:
                self._in_flight.discard((first, end))
                self._landed.add((first, end))

    def confirm(self) -> None:
        """Remove this process's landed allocations from the document (one CAS, none if
        there is nothing to remove). Best effort: an allocation left open only makes a later
        loss of its object look like an honest hole."""
        with self._lock:
            while True:
                with self._flight:
                    landed = set(self._landed)
                if not landed:
                    return
                state = self._cached or self._read()
                mine = {(a.first, a.end) for a in state.open if a.writer == self._writer}
                if not mine & landed:
                    with self._flight:
                        self._landed -= landed
                    return
                try:
                    self._cached = self._cas(
                        state.next_id, state.etag, self._without_landed(state), durable=False
                    )
                except Conflict:
                    self._cached = None
                    continue
                except StorageError as exc:  # unknown outcome, endpoint down, ...
                    self._cached = None
                    log.warning("provenance: could not record landed event ids: %s", exc)
                    return
                with self._flight:
                    self._landed -= landed

    def accept_lost(self, first: int, end: int) -> None:
        """Record ids [first, end) as an open allocation of nobody: the operator accepts that
        their object is gone, so the hole becomes an honest one (skipped by rollover after
        `journal_gap_timeout_s`, never reported again). One CAS."""
        if not 0 <= first < end:
            raise ValueError(f"not an id range: [{first}, {end})")
        with self._lock:
            while True:
                state = self.state()
                if state is None or end > state.next_id:
                    raise ValueError(f"ids up to {end - 1} were never allocated: nothing to accept")
                lost = Allocation(first, end, "accepted-loss", now_ms())
                try:
                    self._cached = self._cas(state.next_id, state.etag, [*state.open, lost])
                    return
                except Conflict:
                    continue
                except UnknownOutcome as exc:
                    self._cached = None
                    raise ProvenanceUnknownOutcome(
                        f"recording ids {first}..{end - 1} as lost: {exc}; run it again"
                    ) from exc

    def settle(self, present: Iterable[tuple[int, int]], high_water: int) -> None:
        """Recovery: drop open allocations whose object is there (`present`: id ranges of the
        journals and manifests listed) or that rollover has passed (below `high_water`)."""
        have = set(present)
        with self._lock:
            while True:
                state = self._cached or self.state()
                if state is None:
                    return  # nothing allocated: nothing to settle, and a reader writes nothing
                keep = [
                    a for a in state.open if a.end > high_water and (a.first, a.end) not in have
                ]
                if len(keep) == len(state.open):
                    return
                try:
                    self._cached = self._cas(state.next_id, state.etag, keep)
                except Conflict:
                    self._cached = None
                    continue
                except UnknownOutcome as exc:
                    self._cached = None
                    log.warning("provenance: could not settle open event ids: %s", exc)
                    return
                with self._flight:
                    self._landed -= {(a.first, a.end) for a in state.open}
                return

    def check_against(self, floor: int) -> None:
        """Start-up check: an allocator behind the data (restored from an old copy, edited)
        would hand out ids that exist already, and events with such ids would be hidden or
        taken for merged journals. It is repaired forward, never used as it is."""
        behind = self.repair(floor)
        if behind is not None:
            log.warning(
                "provenance: event id allocator %s was at %d, behind the data (next id %d); "
                "repaired forward",
                self._store.url(ALLOCATOR_KEY),
                behind,
                floor,
            )

    def repair(self, floor: int) -> int | None:
        """Move the allocator forward to at least `floor` (the next id past every event the
        repository holds) by compare-and-swap, never backward. Returns the value it had when
        it was behind (it was repaired), None when it was not."""
        with self._lock:
            self._high = max(self._high, floor)
            while True:
                try:
                    doc = read_document(self._store, ALLOCATOR_KEY)
                except NotFound:
                    if floor <= 0:
                        self._checked = True
                        return None  # an empty repository: nothing to protect, write nothing
                    state = self._read()
                    current, etag, open_ = state.next_id, state.etag, list(state.open)
                except IntegrityError as exc:
                    # Torn by a machine crash (written without fsync): rebuilt from the data.
                    log.warning("provenance: %s; rebuilt past the data", exc)
                    current, etag, open_ = -1, self._store.head(ALLOCATOR_KEY).etag, []
                else:
                    try:
                        state = parse_state(doc.body, doc.etag)
                        current, etag, open_ = state.next_id, state.etag, list(state.open)
                    except (KeyError, TypeError, ValueError) as exc:
                        log.warning("provenance: allocator %s unreadable (%s); rebuilt", doc, exc)
                        current, etag, open_ = -1, doc.etag, []
                if current >= floor:
                    self._cached = AllocatorState(current, tuple(open_), etag)
                    self._checked = True
                    return None
                # Ids up to `floor` were taken by writes this document no longer records:
                # whether a hole among them is honest is unknown, so it counts as one.
                lost = Allocation(max(current, 0), floor, UNKNOWN_WRITER, now_ms())
                try:
                    new = self._cas(floor, etag, [*open_, lost])
                except Conflict:
                    continue  # someone allocated meanwhile: check again
                except UnknownOutcome as exc:
                    self._cached = None
                    raise ProvenanceUnknownOutcome(
                        f"repairing the event id allocator to {floor}: {exc}"
                    ) from exc
                self._cached = new
                self._checked = True
                return current

    def guess(self) -> int | None:
        """The first id `allocate` will return if no other writer allocates first (None when
        not known yet), so a caller can prepare its work while the CAS runs."""
        cached = self._cached
        return None if cached is None or not self._checked else max(cached.next_id, self._high)

    def allocate(self, count: int) -> int:
        """Take `count` consecutive ids; returns the first. Retries on a lost CAS."""
        if count < 1:
            raise ValueError("count must be >= 1")
        if not self._checked:  # e.g. a writer opened with recover=False after a crash
            self.repair(self._recover_next())
        with self._lock:
            while True:
                current = self._cached or self._read()
                first, etag = current.next_id, current.etag
                # Moved back under us (restored from an old copy, edited by hand): ids below
                # what this process already took are never handed out again.
                first = max(first, self._high)
                taken = Allocation(first, first + count, self._writer, now_ms())
                with self._flight:
                    removed = set(self._landed)
                try:
                    new = self._cas(
                        first + count, etag, [*self._without_landed(current), taken], False
                    )
                except Conflict:
                    self._cached = None
                    continue
                except UnknownOutcome as exc:
                    self._cached = None
                    raise ProvenanceUnknownOutcome(
                        f"allocating {count} event ids: {exc}; no events were written"
                    ) from exc
                self._cached = new
                with self._flight:
                    self._landed -= removed  # this CAS removed them from the document
                    self._in_flight.add((first, first + count))
                self._high = first + count
                return first
