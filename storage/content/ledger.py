"""The claim ledger: claimant counts that survive restarts, on a store that cannot append.

* A **batch** is one small create-only object per session commit, `ledger/batches/<epoch ms>-
  <writer nonce>-<seq>`, holding the resource claims it registers (sealed objects that are
  now referenced), the claimant-count deltas, and the claims it destroys.
* The **checkpoint** `ledger/checkpoint` is the fold of every batch it names in `folded`,
  replaced by compare-and-swap (`put_if_match`). Batches it folded are deleted afterwards;
  readers skip them until then, so a crash between the two steps changes nothing.
* State = checkpoint + every listed batch not folded into it. Counts are sums, so the order
  in which batches from different writers are applied does not matter.

See docs/content-repository.md for the protocol and its crash cases.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..documents import read_document, write_document
from ..errors import Conflict, NotFound, StorageError
from ..integrity import open_json, seal_json
from ..objectstore import ObjectStore
from .errors import ContentRepositoryError, translate

CHECKPOINT = "ledger/checkpoint"
BATCHES = "ledger/batches/"


@dataclass
class ClaimRecord:
    """What the durable ledger says about one resource claim."""

    count: int = 0
    size: int = -1
    created: float = 0.0
    #: When the count last changed: the moment it became archived if the count is 0.
    changed: float = 0.0
    registered: bool = False
    destroyed: bool = False

    @property
    def archived(self) -> bool:
        return self.registered and not self.destroyed and self.count <= 0

    def to_list(self) -> list[Any]:
        return [
            self.count,
            self.size,
            self.created,
            self.changed,
            int(self.registered),
            int(self.destroyed),
        ]

    @classmethod
    def from_list(cls, v: list[Any]) -> ClaimRecord:
        return cls(int(v[0]), int(v[1]), float(v[2]), float(v[3]), bool(v[4]), bool(v[5]))


@dataclass(frozen=True)
class LedgerBatch:
    """The reference changes one session commit makes durable."""

    time: float
    register: Mapping[str, tuple[int, float]] = field(default_factory=dict)  # ref: (size, created)
    deltas: Mapping[str, int] = field(default_factory=dict)
    destroy: tuple[str, ...] = ()

    def empty(self) -> bool:
        return not (self.register or any(self.deltas.values()) or self.destroy)

    def encode(self, writer: str) -> bytes:
        body = {
            "writer": writer,
            "time": self.time,
            "register": {k: list(v) for k, v in self.register.items()},
            "deltas": {k: v for k, v in self.deltas.items() if v},
            "destroy": list(self.destroy),
        }
        return seal_json(body)  # a crc32 field: damage is an integrity error naming the key

    @classmethod
    def decode(cls, data: bytes, where: str = "ledger batch") -> LedgerBatch:
        d = open_json(data, where)
        return cls(
            float(d["time"]),
            {k: (int(v[0]), float(v[1])) for k, v in d.get("register", {}).items()},
            {k: int(v) for k, v in d.get("deltas", {}).items()},
            tuple(d.get("destroy", ())),
        )


def apply(claims: dict[str, ClaimRecord], batch: LedgerBatch) -> None:
    for ref, (size, created) in batch.register.items():
        rec = claims.setdefault(ref, ClaimRecord())
        rec.registered, rec.size, rec.created = True, size, created
        rec.changed = max(rec.changed, batch.time)
    for ref, delta in batch.deltas.items():
        rec = claims.setdefault(ref, ClaimRecord(created=batch.time))
        rec.count += delta
        rec.changed = max(rec.changed, batch.time)
    for ref in batch.destroy:
        rec = claims.setdefault(ref, ClaimRecord())
        rec.destroyed = True
        rec.changed = max(rec.changed, batch.time)


class ClaimLedger:
    """Reads and writes the ledger of one content repository (thread-safe)."""

    def __init__(self, store: ObjectStore, writer: str) -> None:
        self.store = store
        self.writer = writer
        self._lock = threading.RLock()
        self._seq = 0
        self.claims: dict[str, ClaimRecord] = {}
        self._etag: str | None = None
        self._folded: frozenset[str] = frozenset()
        self._applied: set[str] = set()

    # -- writing ----------------------------------------------------------------------------
    def append(self, batch: LedgerBatch) -> str:
        """Write one batch (the durability point of a session commit) and apply it locally."""
        with self._lock:
            self._seq += 1
            key = f"{BATCHES}{int(batch.time * 1000):013d}-{self.writer}-{self._seq:08d}"
        body = batch.encode(self.writer)
        try:
            self.store.put_if_absent(key, body)
        except StorageError as exc:
            raise translate(exc, f"commit claim ledger batch {self.store.url(key)}") from exc
        with self._lock:
            # A concurrent refresh may have listed and applied it already (or a compactor
            # folded it into a checkpoint we loaded): apply each batch exactly once.
            if key not in self._applied and key not in self._folded:
                apply(self.claims, batch)
                self._applied.add(key)
        return key

    # -- reading ----------------------------------------------------------------------------
    def outstanding(self) -> int:
        """Batches applied but not folded into the checkpoint yet."""
        with self._lock:
            return len(self._applied)

    def refresh(self) -> dict[str, ClaimRecord]:
        """Bring the state up to date: checkpoint + every batch not folded into it."""
        with self._lock:
            for _ in range(10):
                if self._try_refresh():
                    return self.claims
            raise ContentRepositoryError(
                f"claim ledger {self.store.url(CHECKPOINT)} kept changing while reading it"
            )

    def _head_etag(self) -> str | None:
        try:
            return self.store.head(CHECKPOINT).etag
        except NotFound:
            return None

    def _try_refresh(self) -> bool:
        try:
            etag = self._head_etag()
            if etag != self._etag:
                self._load_checkpoint()
            listed = [o.key for o in self.store.list(BATCHES)]
            new = [k for k in listed if k not in self._applied and k not in self._folded]
            bodies = self._fetch(new)
            # A compactor that folded and deleted batches between our HEAD and LIST would
            # hide them from us: check the checkpoint did not move meanwhile.
            if bodies is None or self._head_etag() != self._etag:
                self._etag = "(stale)"
                return False
        except StorageError as exc:
            raise translate(exc, f"read claim ledger {self.store.url('ledger')}") from exc
        for key in sorted(bodies):
            apply(self.claims, bodies[key])
            self._applied.add(key)
        return True

    def _fetch(self, keys: list[str]) -> dict[str, LedgerBatch] | None:
        def get(key: str) -> LedgerBatch | None:
            try:
                return LedgerBatch.decode(self.store.get(key), self.store.url(key))
            except NotFound:
                return None  # folded and deleted by a compactor meanwhile

        if not keys:
            return {}
        with ThreadPoolExecutor(min(16, len(keys)), "flowledger-ledger-read") as pool:
            got = list(pool.map(get, keys))
        if any(b is None for b in got):
            return None
        return {k: b for k, b in zip(keys, got, strict=True) if b is not None}

    def _load_checkpoint(self) -> None:
        try:
            doc = read_document(self.store, CHECKPOINT)
        except NotFound:
            self.claims, self._etag, self._folded = {}, None, frozenset()
            self._applied = set()
            return
        d = doc.body
        self.claims = {k: ClaimRecord.from_list(v) for k, v in d["claims"].items()}
        self._etag = doc.etag
        self._folded = frozenset(d.get("folded", ()))
        self._applied = set()

    # -- compaction -------------------------------------------------------------------------
    def checkpoint(self, drop: Iterable[str] = ()) -> bool:
        """Fold every applied batch into a new checkpoint (CAS); drop the `drop` records.

        Returns False if another process replaced the checkpoint first (nothing is lost:
        our batches stay and are folded by whoever compacts next).
        """
        with self._lock:
            self.refresh()
            previous = sorted(self._folded)
            folded = sorted(self._applied)
            claims = {k: v for k, v in self.claims.items() if k not in set(drop)}
            body = {
                "version": 1,
                "writer": self.writer,
                "time": time.time(),
                "folded": folded,
                "claims": {k: v.to_list() for k, v in claims.items()},
            }
            try:
                # Batches folded by the checkpoint being replaced are in it and in ours.
                self.store.delete_many(previous)
                etag = write_document(self.store, CHECKPOINT, body, self._etag)
            except Conflict:
                self._etag = "(stale)"
                return False
            except StorageError as exc:
                raise translate(exc, f"write {self.store.url(CHECKPOINT)}") from exc
            self.claims, self._etag = claims, etag
            self._folded, self._applied = frozenset(folded), set()
        # On failure they are skipped by readers and deleted by the next checkpoint.
        with contextlib.suppress(StorageError):
            self.store.delete_many(folded)
        return True

    def purge(self) -> None:
        with self._lock:
            try:
                self.store.delete_many([o.key for o in self.store.list("ledger/")])
            except StorageError as exc:
                raise translate(exc, f"purge {self.store.url('ledger')}") from exc
            self.claims, self._etag, self._folded, self._applied = {}, None, frozenset(), set()
