"""64-bit event ids, unique and increasing across every writer process of a repository.

One small object holds the next free id. A journal flush takes exactly the ids it needs with
one compare-and-swap on it (`put_if_match`), just before writing the journal object. Ids are
therefore assigned at flush time, never leased ahead: a process that stops (cleanly or not)
holds no unused range, so ids continue after a restart without gaps. The only possible gap is
a writer dying between its CAS and its journal PUT; rollover skips such a hole after
`journal_gap_timeout_s` (see docs/provenance.md).

The per-flush CAS is not made durable (`durable=False`: no fsync on the local backend): the
journal it precedes is, and a process's first allocation repairs the allocator forward from
the data (`repair`), so an allocator a machine crash moved back, truncated or lost is never
used as it is.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from storage import (
    Conflict,
    IntegrityError,
    NotFound,
    ObjectStore,
    UnknownOutcome,
    read_document,
    write_document,
)

from .errors import ProvenanceUnknownOutcome

ALLOCATOR_KEY = "ids/next-event-id"
log = logging.getLogger("flowledger.provenance")


class IdAllocator:
    def __init__(self, store: ObjectStore, recover_next: Callable[[], int]) -> None:
        self._store = store
        self._recover_next = recover_next
        self._writer = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._cached: tuple[int, str] | None = None  # (next id, etag) from our last CAS
        #: The end of the last range this process took: the allocator never goes below it.
        self._high = 0
        #: Checked against the data (`repair`) since this process opened it.
        self._checked = False

    def _body(self, next_id: int) -> dict[str, Any]:
        # A nonce per write makes every body unique, so a retried CAS is resolved correctly.
        # Sealed with a crc32 field (write_document): a damaged allocator is never trusted.
        return {"next_event_id": next_id, "writer": self._writer, "nonce": uuid.uuid4().hex}

    def _cas(self, next_id: int, etag: str | None, durable: bool = True) -> str:
        body = self._body(next_id)
        return write_document(self._store, ALLOCATOR_KEY, body, etag, durable=durable)

    def _read(self) -> tuple[int, str]:
        try:
            doc = read_document(self._store, ALLOCATOR_KEY)
        except NotFound:
            start = self._recover_next()
            try:
                return start, self._cas(start, None)
            except Conflict:
                doc = read_document(self._store, ALLOCATOR_KEY)
        return int(doc.body["next_event_id"]), doc.etag

    def peek(self) -> int:
        """The next id that will be assigned (one GET)."""
        with self._lock:
            self._cached = self._read()
            return self._cached[0]

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
                    current, etag = self._read()
                except IntegrityError as exc:
                    # Torn by a machine crash (written without fsync): rebuilt from the data.
                    log.warning("provenance: %s; rebuilt past the data", exc)
                    current, etag = -1, self._store.head(ALLOCATOR_KEY).etag
                else:
                    try:
                        current, etag = int(doc.body["next_event_id"]), doc.etag
                    except (KeyError, TypeError, ValueError) as exc:
                        log.warning("provenance: allocator %s unreadable (%s); rebuilt", doc, exc)
                        current, etag = -1, doc.etag
                if current >= floor:
                    self._cached = (current, etag)
                    self._checked = True
                    return None
                try:
                    new_etag = self._cas(floor, etag)
                except Conflict:
                    continue  # someone allocated meanwhile: check again
                except UnknownOutcome as exc:
                    self._cached = None
                    raise ProvenanceUnknownOutcome(
                        f"repairing the event id allocator to {floor}: {exc}"
                    ) from exc
                self._cached = (floor, new_etag)
                self._checked = True
                return current

    def guess(self) -> int | None:
        """The first id `allocate` will return if no other writer allocates first (None when
        not known yet), so a caller can prepare its work while the CAS runs."""
        cached = self._cached
        return None if cached is None or not self._checked else max(cached[0], self._high)

    def allocate(self, count: int) -> int:
        """Take `count` consecutive ids; returns the first. Retries on a lost CAS."""
        if count < 1:
            raise ValueError("count must be >= 1")
        if not self._checked:  # e.g. a writer opened with recover=False after a crash
            self.repair(self._recover_next())
        with self._lock:
            while True:
                current = self._cached or self._read()
                first, etag = current
                # Moved back under us (restored from an old copy, edited by hand): ids below
                # what this process already took are never handed out again.
                first = max(first, self._high)
                try:
                    new_etag = self._cas(first + count, etag, durable=False)
                except Conflict:
                    self._cached = None
                    continue
                except UnknownOutcome as exc:
                    self._cached = None
                    raise ProvenanceUnknownOutcome(
                        f"allocating {count} event ids: {exc}; no events were written"
                    ) from exc
                self._cached = (first + count, new_etag)
                self._high = first + count
                return first
