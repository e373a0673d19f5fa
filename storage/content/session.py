"""A content session: the unit whose references become durable together (NiFi's session).

Contents written through a session are packed into its writable resource claims. `commit()`
seals (uploads) those claims, then writes one claim-ledger batch that registers them and
records every claimant-count change of the session: that PUT is the durability point.
A crash before it leaves objects nobody references; `cleanup` finds and archives them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import NotFound, StorageError
from .claims import ContentClaim, ResourceClaim
from .containers import Container
from .errors import ClaimNotWritable, ContentNotFound, translate
from .ledger import LedgerBatch
from .local import WritableClaim
from .writer import ContentWriter

if TYPE_CHECKING:
    from .state import ContentState

log = logging.getLogger("storage.content")


class ContentSession:
    """Thread-safe; a commit waits for the session's open writers to close."""

    def __init__(self, state: ContentState) -> None:
        """Sessions come from `ContentRepository.session()`; `state` is the repository's."""
        self._state = state
        self.settings = state.settings
        self._host = _WriterCallbacks(self)
        self._cond = threading.Condition()
        self._idle: deque[WritableClaim] = deque()
        self._claims: list[WritableClaim] = []  # unsealed claims this session fills
        self._sealed: dict[str, tuple[int, float, Container, ResourceClaim]] = {}
        self._deltas: Counter[str] = Counter()
        self._writers = 0
        self._committing = False

    # -- contents ---------------------------------------------------------------------------
    def create(self) -> ContentClaim:
        """Reserve the next content (NiFi `create`): claimant count 1, written by `write`.

        While a reservation or a writer is outstanding its resource claim is taken, so a
        second `create` gets another resource claim; once the writer closes, the claim is
        offered again until it reaches `max_appendable_size`.
        """
        with self._cond:
            self._wait_commit()
            wc = self._idle.popleft() if self._idle else None
            if wc is not None:
                wc.reserved = len(wc.buf)
        if wc is None:
            wc = self._new_writable()
        self._delta(wc.rc.ref, 1)
        assert wc.reserved is not None
        return ContentClaim(wc.rc, wc.reserved)

    def write(self, claim: ContentClaim | None = None) -> ContentWriter:
        """The output stream of a reserved content (or of a new one if `claim` is None)."""
        if claim is not None and claim.written:
            raise ClaimNotWritable(f"content {claim} is already written; contents are immutable")
        if claim is None:  # the common case: reserve and open in one step
            with self._cond:
                self._wait_commit()
                wc = self._idle.popleft() if self._idle else None
                if wc is not None:
                    wc.reserved, wc.writing = len(wc.buf), True
                    self._writers += 1
            if wc is None:
                wc = self._new_writable(writing=True)
            self._delta(wc.rc.ref, 1)
            assert wc.reserved is not None
            return self._writer(wc, wc.reserved)
        with self._cond:
            self._wait_commit()
            wc = None
            if claim is not None:
                wc = next(
                    (
                        w
                        for w in self._claims
                        if w.rc == claim.resource_claim
                        and w.reserved == claim.offset
                        and not w.writing
                    ),
                    None,
                )
            if wc is not None:
                wc.writing = True
                self._writers += 1
                return self._writer(wc, claim.offset)
        # No reservation to use (none given, or a commit sealed its resource claim since and
        # gave the reservation up): reserve afresh. The claim the writer returns is the one
        # to keep.
        return self.write(self.create())

    def write_bytes(self, data: bytes) -> ContentClaim:
        with self.write() as w:
            w.write(data)
        assert w.claim is not None
        return w.claim

    # -- claimant counts --------------------------------------------------------------------
    def increment(self, claim: ContentClaim | ResourceClaim) -> int:
        rc = claim.resource_claim if isinstance(claim, ContentClaim) else claim
        self._delta(rc.ref, 1)
        return self._state.claimant_count(rc)

    def decrement(self, claim: ContentClaim | ResourceClaim) -> int:
        rc = claim.resource_claim if isinstance(claim, ContentClaim) else claim
        if self._state.claimant_count(rc) <= 0:
            return 0
        self._delta(rc.ref, -1)
        return self._state.claimant_count(rc)

    # -- commit / rollback ------------------------------------------------------------------
    def commit(self) -> str | None:
        """Seal this session's claims and make its references durable (one ledger batch).

        Returns the ledger batch key, or None if there was nothing to record.
        """
        with self._quiesced() as claims:
            for wc in claims:
                if wc.reserved is not None:  # reserved, never written: give it up
                    wc.reserved = None
                    self._delta(wc.rc.ref, -1)
            self._seal_all(claims)
            self._check_stale()
            register = {ref: (size, created) for ref, (size, created, _, _) in self._sealed.items()}
            batch = LedgerBatch(time.time(), register, dict(self._deltas))
            key = None
            if not batch.empty():
                key = self._state.ledger.append(batch)
            self._state.local.forget(list(self._sealed), self._deltas)
            self._sealed.clear()
            self._deltas.clear()
            return key

    def rollback(self) -> None:
        """Forget this session's count changes and delete the contents it wrote."""
        with self._quiesced() as claims:
            for wc in claims:
                with self._state.local.lock:
                    self._state.local.unsealed.pop(wc.rc, None)
            self._claims.clear()
            self._idle.clear()
            by_container: dict[str, list[str]] = {}
            for _, _, container, rc in self._sealed.values():
                by_container.setdefault(container.name, []).append(rc.key)
            for name, keys in by_container.items():
                try:
                    self._state.containers.by_name[name].store.delete_many(keys)
                except StorageError as exc:
                    log.warning("rollback: could not delete %s (%s); cleanup will", keys, exc)
            self._state.local.forget(list(self._sealed), self._deltas)
            self._sealed.clear()
            self._deltas.clear()

    @contextmanager
    def _quiesced(self) -> Iterator[list[WritableClaim]]:
        """Block new writers, wait for open ones, hand over the unsealed claims."""
        with self._cond:
            self._wait_commit()
            self._committing = True
            while self._writers:
                self._cond.wait()
            claims = list(self._claims)
        try:
            yield claims
        finally:
            with self._cond:
                self._committing = False
                self._cond.notify_all()

    def _wait_commit(self) -> None:
        while self._committing:
            self._cond.wait()

    # -- internals, and what ContentWriter reports (through `_WriterCallbacks`) -------------
    def _writer(self, wc: WritableClaim, offset: int) -> ContentWriter:
        return ContentWriter(self._host, wc, offset, self.settings.large_content_threshold)

    def _delta(self, ref: str, n: int) -> None:
        with self._cond:
            self._deltas[ref] += n
        self._state.local.delta(ref, n)

    def _new_writable(self, writing: bool = False) -> WritableClaim:
        rc, container = self._state.new_resource_claim()
        wc = WritableClaim(rc, container, time.time(), reserved=0, writing=writing)
        self._state.local.add_unsealed(wc)
        with self._cond:
            self._wait_commit()  # never slip a claim into a commit's snapshot
            self._claims.append(wc)
            if writing:
                self._writers += 1
        return wc

    def _new_own_claim(self) -> tuple[ResourceClaim, Container]:
        return self._state.new_resource_claim()

    def _moved(self, wc: WritableClaim, rc: ResourceClaim) -> None:
        """A content left `wc` for its own claim `rc`: move its reference, free `wc`."""
        self._delta(wc.rc.ref, -1)
        self._delta(rc.ref, 1)
        with self._cond:
            wc.writing, wc.reserved = False, None
            self._idle.append(wc)

    def _own_closed(self, rc: ResourceClaim, size: int) -> None:
        container = self._state.containers.by_name[rc.container]
        self._state.local.sealed_now(rc, size)
        with self._cond:
            self._sealed[rc.ref] = (size, time.time(), container, rc)
            self._writers -= 1
            self._cond.notify_all()

    def _closed(self, wc: WritableClaim) -> None:
        if len(wc.buf) >= self.settings.max_appendable_size:
            try:
                self._seal(wc)
            finally:
                self._writer_done(wc, requeue=False)
        else:
            self._writer_done(wc, requeue=True)

    def _aborted(self, wc: WritableClaim | None, rc: ResourceClaim | None) -> None:
        if rc is not None:
            self._delta(rc.ref, -1)
        if wc is not None:
            self._delta(wc.rc.ref, -1)
            self._writer_done(wc, requeue=True)
        else:
            with self._cond:
                self._writers -= 1
                self._cond.notify_all()

    def _writer_done(self, wc: WritableClaim, requeue: bool) -> None:
        with self._cond:
            wc.writing, wc.reserved = False, None
            if requeue and wc in self._claims:
                self._idle.append(wc)
            self._writers -= 1
            self._cond.notify_all()

    def _seal(self, wc: WritableClaim) -> None:
        """Upload the buffer as the resource claim's one immutable object."""
        with self._cond:
            if wc not in self._claims:
                return
        size = len(wc.buf)
        if size or self._deltas.get(wc.rc.ref, 0):
            try:
                wc.container.store.put_if_absent(wc.rc.key, bytes(wc.buf))
            except StorageError as exc:
                raise translate(exc, f"seal resource claim {wc.rc}") from exc
            self._state.local.sealed_now(wc.rc, size)
            with self._cond:
                self._sealed[wc.rc.ref] = (size, wc.created, wc.container, wc.rc)
        else:
            with self._state.local.lock:
                self._state.local.unsealed.pop(wc.rc, None)
        with self._cond:
            self._claims.remove(wc)
            if wc in self._idle:
                self._idle.remove(wc)

    def _seal_all(self, claims: list[WritableClaim]) -> None:
        if len(claims) <= 1:
            for wc in claims:
                self._seal(wc)
            return
        list(self._state.seal_pool.map(self._seal, claims))

    def _check_stale(self) -> None:
        """A claim sealed long ago may have been archived as an orphan by another process's
        cleanup (that is harmless: registering it revives it), or destroyed if it then also
        outlived the archive retention: make sure it still exists before referencing it."""
        limit = time.time() - self.settings.orphan_grace_period / 2
        for ref, (_, created, container, rc) in self._sealed.items():
            if created < limit:
                try:
                    container.store.head(rc.key)
                except NotFound as exc:
                    raise ContentNotFound(
                        f"commit: resource claim {ref} was sealed {time.time() - created:.0f}s "
                        "ago and has been cleaned up as an orphan; sessions must commit within "
                        "orphan_grace_period"
                    ) from exc

    def adopt(self, rc: ResourceClaim, size: int, created: float) -> None:
        """A sealed object written outside a writer (a composed merge) joins the session
        with one reference, made durable by the session's commit."""
        container = self._state.containers.by_name[rc.container]
        self._state.local.sealed_now(rc, size)
        with self._cond:
            self._sealed[rc.ref] = (size, created, container, rc)
        self._delta(rc.ref, 1)


class _WriterCallbacks:
    """The `WriterHost` a session hands its writers: forwards to the session's internals,
    which stay out of the session's public API."""

    def __init__(self, session: ContentSession) -> None:
        self._session = session

    def new_own_claim(self) -> tuple[ResourceClaim, Container]:
        return self._session._new_own_claim()

    def moved(self, wc: WritableClaim, rc: ResourceClaim) -> None:
        self._session._moved(wc, rc)

    def own_closed(self, rc: ResourceClaim, size: int) -> None:
        self._session._own_closed(rc, size)

    def closed(self, wc: WritableClaim) -> None:
        self._session._closed(wc)

    def aborted(self, wc: WritableClaim | None, rc: ResourceClaim | None) -> None:
        self._session._aborted(wc, rc)
