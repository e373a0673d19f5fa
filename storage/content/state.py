"""The state one content repository shares with its sessions, cleanup and merge.

`ContentRepository` builds one `ContentState` and hands it to each `ContentSession` and to
the functions of `cleanup` and `merge` (as pyiceberg's `table/maintenance.py` receives the
table): they read and change the repository only through it, never through the repository's
private attributes. Building it does no I/O and starts no thread.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..objectstore import ObjectStore
from ..timeutil import now_ms
from .claims import ResourceClaim
from .containers import Container, ContainerSet
from .errors import ContentNotFound, ContentRepositoryError
from .ledger import ClaimLedger, ClaimRecord
from .local import LocalClaims
from .settings import ContentRepositorySettings

#: Threads that seal a session's resource claims in parallel at commit.
SEAL_THREADS = 8


class ContentState:
    """Durable view (`ledger`), this process's uncommitted claims (`local`), the containers,
    and the lock that serialises cleanup work. The attributes are set once, here."""

    def __init__(
        self,
        store: ObjectStore,
        settings: ContentRepositorySettings,
        containers: Sequence[Container],
        writer_id: str,
        relieve: Callable[[], object],
    ) -> None:
        """`relieve` frees space while writers wait under backpressure (archive cleanup)."""
        self.settings = settings
        self.writer_id = writer_id  # never reused: claims of a dead process stay
        self.ledger = ClaimLedger(store, writer_id)
        self.local = LocalClaims()
        self.containers = ContainerSet(containers, settings, self.usage, relieve)
        #: Destruction, the orphan sweep and compaction never run at once in one process.
        self.cleanup_lock = threading.RLock()
        # An executor starts its threads with the first task, not here.
        self.seal_pool = ThreadPoolExecutor(
            SEAL_THREADS, thread_name_prefix="flowledger-content-seal"
        )
        self._ids = itertools.count(1)
        self._ids_lock = threading.Lock()
        self._loaded = False

    # -- the durable view -------------------------------------------------------------------
    def refresh(self) -> dict[str, ClaimRecord]:
        """Read the claim ledger (checkpoint + new batches); from then on counts are known."""
        claims = self.ledger.refresh()
        self._loaded = True
        return claims

    def claims(self) -> dict[str, ClaimRecord]:
        """The ledger's records as of the last refresh (refused before the first one: a
        repository that never read its ledger would take every claim for unreferenced)."""
        if not self._loaded:
            raise ContentRepositoryError(
                f"content repository {self.ledger.store.uri} is not initialized: open it with "
                "ContentRepository.open(...) or call initialize() before using it"
            )
        return self.ledger.claims

    def record(self, ref: str) -> ClaimRecord | None:
        """What the ledger says about `ref` as of the last refresh."""
        return self.claims().get(ref)

    def claimant_count(self, rc: ResourceClaim) -> int:
        """This process's view: the durable count (as of the last refresh) + pending changes."""
        rec = self.record(rc.ref)
        durable = rec.count if rec is not None and not rec.destroyed else 0
        return max(0, durable + self.local.pending_delta(rc.ref))

    def usage(self, name: str) -> int:
        """Bytes of registered, non-destroyed claims in container `name`, plus ours."""
        prefix = name + "/"
        durable = sum(
            r.size
            for ref, r in list(self.claims().items())
            if r.registered and not r.destroyed and r.size > 0 and ref.startswith(prefix)
        )
        return durable + self.local.usage(name)

    # -- resource claims --------------------------------------------------------------------
    def new_resource_claim(self) -> tuple[ResourceClaim, Container]:
        """A fresh identifier in the next container not under backpressure (may wait)."""
        index = self.containers.next_index()
        container = self.containers.choose(index)
        section = str(index % self.settings.sections)
        with self._ids_lock:
            n = next(self._ids)
        ident = f"{now_ms():013d}-{self.writer_id}-{n}"
        return ResourceClaim(container.name, section, ident), container

    def container(self, rc: ResourceClaim) -> Container:
        try:
            return self.containers.by_name[rc.container]
        except KeyError:
            raise ContentNotFound(
                f"content {rc}: container {rc.container!r} is not configured "
                f"(containers: {', '.join(self.containers.names())})"
            ) from None
