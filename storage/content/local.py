"""What this process holds that the durable ledger does not know yet (thread-safe)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from .claims import ResourceClaim
from .containers import Container


@dataclass(eq=False)
class WritableClaim:
    """A resource claim still being filled: a buffer that becomes one object when sealed."""

    rc: ResourceClaim
    container: Container
    created: float
    buf: bytearray = field(default_factory=bytearray)
    #: Offset of the outstanding reservation (a `create()` not yet written), if any.
    reserved: int | None = None
    #: A writer is streaming into the buffer.
    writing: bool = False


class LocalClaims:
    """Unsealed buffers, sealed-but-uncommitted objects and uncommitted count deltas."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.unsealed: dict[ResourceClaim, WritableClaim] = {}
        self.sealed: dict[str, int] = {}  # ref -> size, uploaded but not in a ledger batch yet
        self.pending: Counter[str] = Counter()

    def add_unsealed(self, wc: WritableClaim) -> None:
        with self.lock:
            self.unsealed[wc.rc] = wc

    def sealed_now(self, rc: ResourceClaim, size: int) -> None:
        with self.lock:
            self.unsealed.pop(rc, None)
            self.sealed[rc.ref] = size

    def forget(self, refs: list[str], deltas: Counter[str]) -> None:
        with self.lock:
            for ref in refs:
                self.sealed.pop(ref, None)
            self.pending.subtract(deltas)
            for ref in [r for r, n in self.pending.items() if n == 0]:
                del self.pending[ref]

    def delta(self, ref: str, n: int) -> None:
        with self.lock:
            self.pending[ref] += n

    def pending_delta(self, ref: str) -> int:
        with self.lock:
            return self.pending.get(ref, 0)

    def holds(self, ref: str) -> bool:
        """True if this process may still register `ref` (so no cleanup may touch it)."""
        with self.lock:
            return (
                ref in self.sealed
                or self.pending.get(ref, 0) > 0
                or any(rc.ref == ref for rc in self.unsealed)
            )

    def usage(self, container: str) -> int:
        with self.lock:
            size = sum(len(wc.buf) for rc, wc in self.unsealed.items() if rc.container == container)
            return size + sum(
                n for ref, n in self.sealed.items() if ref.startswith(container + "/")
            )
