"""Decoded journals kept in memory: journals are immutable once written, so a journal this
process wrote or read is never stale; readers may be threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa
from cachetools import FIFOCache

from .layout import JournalRef

#: Journals kept decoded in memory (a lookup loads only those its journal filter selects).
JOURNAL_CACHE = 256


class JournalCache:
    def __init__(self, load: Callable[[JournalRef], pa.Table], size: int = JOURNAL_CACHE) -> None:
        self._load = load
        #: The oldest journal is dropped first (lookups select journals by their filters, so
        #: recency of use says little about the next lookup).
        self._tables: FIFOCache[str, pa.Table] = FIFOCache(size)
        self._lock = threading.Lock()

    def put(self, ref: JournalRef, table: pa.Table) -> None:
        with self._lock:
            self._tables[ref.key] = table

    def get(self, ref: JournalRef) -> pa.Table:
        """The journal's events, read (and verified) on a miss."""
        with self._lock:
            t = self._tables.get(ref.key)
        if t is None:
            t = self._load(ref)
            self.put(ref, t)
        return t
