"""The heads of format 4 log objects (their stream's schema message, some 400-500 bytes),
kept by a reader once read, so it GETs an object's head once however many of the object's
blocks it reads by range (a compaction's groups, keyed/log/objects.py `LogCache`).

A block read alone needs its object's head too (its schema, and the checksum its commit
recorded covers the head's bytes and the block's): without this, a block ending far into its
object costs two GETs, head and block, for every file group read that way. Objects are
immutable and never rewritten with other bytes (a retried write PUTs the same bytes), so a
head read once stays true for the reader's life; a head is kept only after it verified with
a block, under the object's URI and recorded checksum. Bounded: the least recently used
heads go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

#: Heads a reader keeps (about half a kilobyte each).
MAX_HEADS = 4096


class Heads:
    """A bounded, thread-safe map of (object URI, object checksum) to head bytes."""

    def __init__(self, limit: int = MAX_HEADS) -> None:
        self.limit = limit
        self._heads: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, where: str, checksum: str) -> bytes | None:
        with self._lock:
            head = self._heads.get((where, checksum))
            if head is not None:
                self._heads.move_to_end((where, checksum))
            return head

    def put(self, where: str, checksum: str, head: bytes) -> None:
        with self._lock:
            self._heads[(where, checksum)] = head
            self._heads.move_to_end((where, checksum))
            while len(self._heads) > self.limit:
                self._heads.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._heads.clear()
