"""The content repository (NiFi's ContentRepository), on object-store containers."""

from __future__ import annotations

import io
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import BinaryIO

from ..errors import NotFound, StorageError
from ..lifecycle import Closing
from ..objectstore import ObjectStore
from ..settings import StoreSettings
from ..uri import open_store
from . import cleanup, merge, reading
from .claims import ContentClaim, ResourceClaim
from .containers import Container
from .errors import ContentIntegrityError, ContentNotFound, ContentRepositoryError, translate
from .ledger import ClaimLedger
from .session import ContentSession
from .settings import ContentRepositorySettings
from .state import ContentState
from .writer import ContentWriter

log = logging.getLogger("storage.content")

Source = str | os.PathLike[str] | BinaryIO | bytes


class ContentRepository(Closing):
    """Contents packed into immutable resource-claim objects, with durable claimant counts.

    `store` is the repository's own prefix (the claim ledger lives there, and so does the
    default container). Containers may also be given as (name, ObjectStore or URI) pairs.
    Repository-level `create`/`write`/`increment`/`decrement` go through a default session
    committed by `commit()` (and `close()`); `session()` gives independent ones.

    Constructing does no I/O and starts no thread: `initialize()` (NiFi's name) reads the
    claim ledger, sweeps orphans and starts the archive-cleanup thread. `open()` does both.
    """

    def __init__(
        self,
        store: ObjectStore,
        settings: ContentRepositorySettings | None = None,
        containers: Sequence[tuple[str, ObjectStore | str]] | None = None,
        store_settings: StoreSettings | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or ContentRepositorySettings()
        self.writer_id = uuid.uuid4().hex[:12]  # never reused: claims of a dead process stay
        specs: Sequence[tuple[str, ObjectStore | str]] = (
            containers or self.settings.containers or [("default", "")]
        )
        self._owned: list[ObjectStore] = []
        built = []
        for name, where in specs:
            if isinstance(where, ObjectStore):
                built.append(Container(name, where))
            elif where == "":
                built.append(Container(name, store.scoped(f"containers/{name}")))
            else:
                opened = open_store(where, store_settings)  # a handle: no request is made
                self._owned.append(opened)
                built.append(Container(name, opened))
        self._state = ContentState(
            store, self.settings, built, self.writer_id, self.run_archive_cleanup
        )
        self.containers = self._state.containers
        self._default = ContentSession(self._state)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._initialized = False

    @classmethod
    def open(
        cls,
        repo: str | ObjectStore | None,
        settings: ContentRepositorySettings | None = None,
        store_settings: StoreSettings | None = None,
    ) -> ContentRepository:
        """The content repository of a flowledger repository (its `content/` prefix),
        initialized; `repo` is a URI (None: $FLOWLEDGER_REPO or the embedded default) or its
        root store."""
        root = repo if isinstance(repo, ObjectStore) else open_store(repo, store_settings)
        return cls(root.scoped("content"), settings, store_settings=store_settings).initialize()

    def initialize(self) -> ContentRepository:
        """NiFi `initialize`: read the claim ledger, run `cleanup()` if `cleanup_on_start`,
        start the archive-cleanup thread if `archive_cleanup_frequency` > 0. Returns self;
        a second call does nothing."""
        if self._initialized:
            return self
        self._state.refresh()
        if self.settings.cleanup_on_start:
            self.cleanup()
        if self.settings.archive_cleanup_frequency > 0:
            self._thread = threading.Thread(
                target=self._background, name="flowledger-content-cleanup", daemon=True
            )
            self._thread.start()
        self._initialized = True  # only now: a failed step is retried by the next call
        return self

    @property
    def ledger(self) -> ClaimLedger:
        """The claim ledger: durable counts as of the last refresh (read it, don't write)."""
        return self._state.ledger

    # -- lifecycle --------------------------------------------------------------------------
    def session(self) -> ContentSession:
        return ContentSession(self._state)

    @contextmanager
    def transaction(self) -> Iterator[ContentSession]:
        """A session committed on a clean exit and rolled back on an exception."""
        s = self.session()
        try:
            yield s
        except BaseException:
            s.rollback()
            raise
        s.commit()

    def commit(self) -> str | None:
        """Commit the default session (seal its claims, write its ledger batch)."""
        return self._default.commit()

    def close(self) -> None:
        """Commit the default session and stop the cleanup thread (NiFi `shutdown`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self._default.commit()
        finally:
            self._state.seal_pool.shutdown(wait=True)
            for s in self._owned:
                s.close()

    shutdown = close

    # -- containers -------------------------------------------------------------------------
    def get_container_names(self) -> list[str]:
        return self.containers.names()

    def get_container_capacity(self, name: str) -> int | None:
        """`max_bytes` (object stores have no capacity of their own); None = unlimited."""
        return self.containers.capacity(name)

    def get_container_usable_space(self, name: str) -> int | None:
        return self.containers.usable_space(name)

    def get_container_usage(self, name: str) -> int:
        return self._state.usage(name)

    # -- contents (default session) ---------------------------------------------------------
    def create(self, loss_tolerant: bool = False) -> ContentClaim:
        return self._default.create()

    def write(self, claim: ContentClaim | None = None) -> ContentWriter:
        return self._default.write(claim)

    def write_bytes(self, data: bytes) -> ContentClaim:
        return self._default.write_bytes(data)

    def increment_claimant_count(self, claim: ContentClaim | ResourceClaim) -> int:
        return self._default.increment(claim)

    def decrement_claimant_count(self, claim: ContentClaim | ResourceClaim) -> int:
        return self._default.decrement(claim)

    def get_claimant_count(self, claim: ContentClaim | ResourceClaim) -> int:
        """This process's view: the durable count (as of the last refresh) + pending changes."""
        rc = claim.resource_claim if isinstance(claim, ContentClaim) else claim
        return self._state.claimant_count(rc)

    def clone(self, original: ContentClaim, loss_tolerant: bool = False) -> ContentClaim:
        """Share the bytes (contents are immutable): the same claim, one more claimant."""
        if not original.written:
            raise ContentRepositoryError(f"cannot clone content {original}: it is not written")
        self.increment_claimant_count(original)
        return original

    # -- reading ----------------------------------------------------------------------------
    def _unsealed_bytes(self, claim: ContentClaim) -> bytes | None:
        with self._state.local.lock:
            wc = self._state.local.unsealed.get(claim.resource_claim)
            if wc is None:
                return None
            if claim.offset > len(wc.buf) or (claim.offset == len(wc.buf) and claim.length):
                raise ContentNotFound(
                    f"content {claim} not found: offset {claim.offset} is past the end of "
                    f"resource claim {claim.resource_claim} ({len(wc.buf)} bytes written)"
                )
            data = bytes(wc.buf[claim.offset : claim.offset + claim.length])
        return reading.verify_bytes(claim, f"(unsealed) {claim.resource_claim}", data)

    def _readable(self, claim: ContentClaim) -> None:
        if not claim.written:
            raise ContentRepositoryError(
                f"content {claim} has no length/checksum: pass the claim the writer returned"
            )
        rec = self._state.record(claim.resource_claim.ref)
        if rec is not None and rec.destroyed:
            raise ContentNotFound(
                f"content {claim} not found: resource claim {claim.resource_claim} was "
                "destroyed (unreferenced and past its archive retention)"
            )

    def read(self, claim: ContentClaim) -> BinaryIO:
        """A stream of the content; every byte is checked against the claim's checksum."""
        self._readable(claim)
        local = self._unsealed_bytes(claim)
        if local is not None:
            return io.BytesIO(local)
        store = self._state.container(claim.resource_claim).store
        s = self.settings
        return reading.open_stream(
            store, claim, s.verify_in_memory_max, s.read_part_size, s.read_ahead_parts
        )

    def read_bytes(self, claim: ContentClaim) -> bytes:
        self._readable(claim)
        local = self._unsealed_bytes(claim)
        if local is not None:
            return local
        return reading.read_bytes(self._state.container(claim.resource_claim).store, claim)

    def size(self, claim: ContentClaim | None) -> int:
        return 0 if claim is None else max(0, claim.length)

    def is_accessible(self, claim: ContentClaim) -> bool:
        """True if the content can still be read (live or archived); one HEAD at most."""
        rec = self._state.record(claim.resource_claim.ref)
        if rec is not None and rec.destroyed:
            return False
        with self._state.local.lock:
            wc = self._state.local.unsealed.get(claim.resource_claim)
            if wc is not None:
                return claim.offset + max(0, claim.length) <= len(wc.buf)
        if claim.length == 0:
            return True
        try:
            info = self._state.container(claim.resource_claim).store.head(claim.resource_claim.key)
        except NotFound:
            return False
        except StorageError as exc:
            raise translate(exc, f"check content {claim}") from exc
        except ContentNotFound:
            return False
        return info.size >= claim.offset + max(0, claim.length)

    def claim_state(self, claim: ContentClaim | ResourceClaim) -> str:
        """writable | pending | active | archived | destroyed | unknown (this process's view)."""
        rc = claim.resource_claim if isinstance(claim, ContentClaim) else claim
        with self._state.local.lock:
            if rc in self._state.local.unsealed:
                return "writable"
            if rc.ref in self._state.local.sealed:
                return "pending"
        rec = self._state.record(rc.ref)
        if rec is None or not rec.registered:
            return "destroyed" if rec is not None and rec.destroyed else "unknown"
        if rec.destroyed:
            return "destroyed"
        return "archived" if self.get_claimant_count(rc) <= 0 else "active"

    # -- import / export --------------------------------------------------------------------
    def import_from(self, content: Source, claim: ContentClaim | None = None) -> ContentClaim:
        """Copy a file, stream or bytes into a new content; returns its claim."""
        with self._default.write(claim) as w:
            if isinstance(content, bytes):
                w.write(content)
            elif isinstance(content, str | os.PathLike):
                with open(content, "rb") as fh:
                    w.write_from(fh)
            else:
                w.write_from(content)
        assert w.claim is not None
        return w.claim

    def export_to(
        self,
        claim: ContentClaim,
        destination: str | os.PathLike[str] | BinaryIO,
        append: bool = False,
        offset: int = 0,
        length: int | None = None,
    ) -> int:
        """Copy the content (or `length` bytes from `offset`) to a path or stream."""
        if offset < 0 or offset > max(0, claim.length):
            raise ContentNotFound(f"content {claim}: offset {offset} is past its end")
        end = claim.length if length is None else min(claim.length, offset + length)
        if isinstance(destination, str | os.PathLike):
            with open(destination, "ab" if append else "wb") as fh:
                return self._copy_out(claim, fh, offset, end)
        return self._copy_out(claim, destination, offset, end)

    def _copy_out(self, claim: ContentClaim, out: BinaryIO, start: int, end: int) -> int:
        # The whole content is read so that its checksum is verified; the slice is skipped to.
        pos = written = 0
        with self.read(claim) as stream:
            while block := stream.read(4 * 1024 * 1024):
                lo, hi = max(start - pos, 0), min(end - pos, len(block))
                if lo < hi:
                    out.write(block if (lo, hi) == (0, len(block)) else block[lo:hi])
                    written += hi - lo
                pos += len(block)
        return written

    # -- merge ------------------------------------------------------------------------------
    def merge(
        self,
        claims: Iterable[ContentClaim],
        destination: ContentClaim | None = None,
        header: bytes = b"",
        footer: bytes = b"",
        demarcator: bytes = b"",
    ) -> ContentClaim:
        """One new content: header + claims joined by demarcator + footer.

        Large merges are composed server-side (UploadPartCopy) into a claim of their own;
        the checksum is derived from the parts' checksums, so no byte is read back.
        """
        parts = list(claims)
        for c in parts:
            self._readable(c)
        glue = len(header) + len(footer) + len(demarcator) * max(0, len(parts) - 1)
        total = glue + sum(c.length for c in parts)
        big = any(c.length >= 5 * 1024 * 1024 for c in parts)
        if total > self.settings.large_content_threshold and big:
            composed = merge.compose_merge(self._state, parts, header, footer, demarcator)
            if composed is not None:
                rc = composed.resource_claim
                self._default.adopt(rc, composed.length, time.time())
                return composed
        with self._default.write(destination) as w:
            w.write(header)
            for i, c in enumerate(parts):
                if i and demarcator:
                    w.write(demarcator)
                with self.read(c) as stream:
                    w.write_from(stream)
            w.write(footer)
        assert w.claim is not None
        return w.claim

    # -- removal, cleanup -------------------------------------------------------------------
    def remove(self, claim: ContentClaim | ResourceClaim) -> bool:
        """Destroy the resource claim now if nothing references it and no stream is open."""
        rc = claim.resource_claim if isinstance(claim, ContentClaim) else claim
        with self._state.local.lock:
            if rc in self._state.local.unsealed:
                return False  # still writable (a stream may append to it)
        if self.get_claimant_count(rc) > 0:
            return False
        return cleanup.destroy(self._state, [rc.ref]) > 0

    def cleanup(self) -> int:
        """NiFi `cleanup`: archive objects nobody references (their writer crashed before
        committing) and finish interrupted destructions; abort uploads and remove temp files
        of writers that died mid-write (older than `multipart_purge_age`). Returns objects
        archived."""
        archived = cleanup.sweep_orphans(self._state)
        self.abort_stale_uploads()
        return archived

    def abort_stale_uploads(self, older_than: float | None = None) -> int:
        """Abort incomplete multipart uploads (local: delete temp files) in every container
        started more than `older_than` seconds ago (default: the store's
        `multipart_purge_age`, s3a's `fs.s3a.multipart.purge.age`). Returns how many."""
        return cleanup.abort_stale_uploads(self._state, older_than)

    def run_archive_cleanup(self) -> int:
        """Destroy archived claims past retention or over the usage limit; returns how many."""
        return cleanup.expire_archive(self._state)

    def checkpoint(self) -> bool:
        """Compact the claim ledger into its checkpoint (CAS)."""
        return cleanup.compact(self._state)

    def purge(self) -> None:
        """Delete every content and the ledger, as if the repository were new."""
        with self._state.cleanup_lock:
            self._default.rollback()
            for c in self.containers.order:
                try:
                    c.store.delete_many([o.key for o in c.store.list()])
                except StorageError as exc:
                    raise translate(exc, f"purge container {c.name}") from exc
            self._state.ledger.purge()

    def _background(self) -> None:
        while not self._stop.wait(self.settings.archive_cleanup_frequency):
            try:
                self.run_archive_cleanup()
            except Exception:  # the thread must survive a transient store outage
                log.exception("content repository archive cleanup failed; will retry")


__all__ = ["ContentIntegrityError", "ContentRepository"]
