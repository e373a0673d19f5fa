"""Journals: several in-memory buffers written concurrently; a flush is one object.

A flush takes its event ids from the allocator (one compare-and-swap), writes the events as
one create-only Arrow IPC object named by its id range, and only then reports them durable.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from storage import Conflict, ObjectStore

from .errors import ProvenanceConflict
from .ids import IdAllocator
from .layout import JournalRef, journal_key
from .parquet_io import encode_journal
from .schema import assign_ids


@dataclass
class _Buffer:
    lock: threading.Lock = field(default_factory=threading.Lock)
    tables: list[pa.Table] = field(default_factory=list)
    rows: int = 0
    since: float = 0.0
    #: An encoded flush whose PUT failed: retried with the same ids and bytes.
    pending: tuple[str, bytes, JournalRef] | None = None


class JournalWriter:
    def __init__(
        self,
        store: ObjectStore,
        allocator: IdAllocator,
        count: int,
        max_events: int,
        compression: str,
        on_flushed: Callable[[JournalRef], None],
    ) -> None:
        self._store = store
        self._allocator = allocator
        self._buffers = [_Buffer() for _ in range(count)]
        self._next = itertools.count()
        self._max_events = max_events
        self._compression = compression
        self._on_flushed = on_flushed

    def append(self, table: pa.Table, sync: bool) -> list[JournalRef]:
        """Buffer events in the next journal (round robin); flush it if full or `sync`."""
        buf = self._buffers[next(self._next) % len(self._buffers)]
        with buf.lock:
            if not buf.tables:
                buf.since = time.monotonic()
            buf.tables.append(table)
            buf.rows += table.num_rows
            if sync or buf.rows >= self._max_events:
                return self._flush_locked(buf)
        return []

    def flush(self, older_than: float | None = None) -> list[JournalRef]:
        """Flush every journal (or those buffered longer than `older_than` seconds)."""
        out = []
        now = time.monotonic()
        for buf in self._buffers:
            with buf.lock:
                if older_than is not None and (not buf.tables or now - buf.since < older_than):
                    continue
                out += self._flush_locked(buf)
        return out

    def buffered(self) -> int:
        return sum(b.rows for b in self._buffers)

    def _flush_locked(self, buf: _Buffer) -> list[JournalRef]:
        done = []
        if buf.pending is not None:
            done.append(self._put(buf, *buf.pending))
        if buf.rows:
            table = pa.concat_tables(buf.tables) if len(buf.tables) > 1 else buf.tables[0]
            first = self._allocator.allocate(table.num_rows)
            end = first + table.num_rows
            data = encode_journal(assign_ids(table, first), self._compression)
            key = journal_key(first, end)
            buf.pending = (key, data, JournalRef(first, end, key, len(data)))
            buf.tables, buf.rows = [], 0
            done.append(self._put(buf, *buf.pending))
        return done

    def _put(self, buf: _Buffer, key: str, data: bytes, ref: JournalRef) -> JournalRef:
        try:
            self._store.put_if_absent(key, data)
        except Conflict as exc:
            # Our ids are ours alone, so an existing object is our own earlier attempt.
            if self._store.get(key) != data:
                raise ProvenanceConflict(f"journal {key} exists with other contents") from exc
        buf.pending = None
        self._on_flushed(ref)
        return ref
