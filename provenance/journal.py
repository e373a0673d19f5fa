"""Journals: several in-memory buffers written concurrently; a flush is one object.

A flush takes its event ids from the allocator (one compare-and-swap), writes the events as
one create-only Arrow IPC object named by its id range, and only then reports them durable.
Where the store can append (the local backend), the flush is instead one block appended to the
writer's log and one `fdatasync` (provenance/journal_logs.py); a log is replaced by a new one
past `log_bytes`, and when an append fails (the block is then written into a new log).

Group commit: a caller that needs its batch durable (`sync=True`) appends it to a journal and
then waits for that journal's I/O lock. Whoever holds the lock writes *every* batch buffered in
the journal at that moment as one object, so callers arriving while a flush is in flight share
the next one (one CAS and one PUT for all of them). A leader that knows of writers about to
append waits for them at most `sync_wait_s` (NiFi's journals are shared the same way; the
bound keeps a lone writer from waiting at all).
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from storage import AppendLog, Conflict, ObjectStore

from . import crash
from .errors import ProvenanceConflict
from .ids import IdAllocator
from .layout import JournalRef, block_ref, journal_key, log_key
from .parquet_io import encode_journal
from .schema import assign_ids


@dataclass
class _Pending:
    """An encoded flush whose PUT has not succeeded yet: retried with the same ids and bytes."""

    key: str
    data: bytes
    ref: JournalRef
    #: (sequence number, first id) of each batch in the flush, in order.
    batches: list[tuple[int, int]]


@dataclass
class _Buffer:
    #: Guards the buffered batches (held briefly; appends never wait for I/O).
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: One flush at a time per journal; a waiting sync caller may find its batch written.
    io: threading.Lock = field(default_factory=threading.Lock)
    tables: list[pa.Table] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    rows: int = 0
    since: float = 0.0
    next_seq: int = 0
    #: Every batch with a sequence number below this is durable.
    durable: int = 0
    #: Sync batches not yet written, and the first id of those written but not collected.
    waiting: set[int] = field(default_factory=set)
    ids: dict[int, int] = field(default_factory=dict)
    pending: _Pending | None = None


class JournalWriter:
    def __init__(
        self,
        store: ObjectStore,
        allocator: IdAllocator,
        count: int,
        max_events: int,
        compression: str,
        on_flushed: Callable[[JournalRef, pa.Table | None, Any], None],
        sync_wait_s: float = 0.0,
        prepare: Callable[[pa.Table], Any] | None = None,
        log_bytes: int = 0,
    ) -> None:
        """`prepare(table)` runs while a flush's journal is being written; its result is
        passed to `on_flushed(ref, table, prepared)` once the journal is durable.
        `log_bytes`: append flushes to a log of about this size where the store can (0: one
        object per flush)."""
        self._store = store
        self._allocator = allocator
        self._buffers = [_Buffer() for _ in range(count)]
        self._next = itertools.count()
        self._max_events = max_events
        self._compression = compression
        self._on_flushed = on_flushed
        self._prepare = prepare
        self._sync_wait_s = sync_wait_s
        #: Sync writers between `arriving()` (they started converting their batch) and
        #: appending it: a flushing writer waits, at most `sync_wait_s`, for them.
        self._arriving = 0
        self._arrival = threading.Condition()
        #: A flush's id CAS runs here while the flushing thread encodes the journal, and its
        #: PUT while that thread prepares what readers need (the journal filter): the
        #: requests' fsyncs (or HTTP round trips) overlap that CPU work. A flush holds its
        #: journal's I/O lock and waits for its one task, so a thread per journal is enough
        #: (threads start on demand). Shut down by `close()`.
        self._puts = ThreadPoolExecutor(
            max(1, count), thread_name_prefix="flowledger-provenance-journal-put"
        )
        self._log_bytes = log_bytes
        self._log: AppendLog | None = None
        self._log_end_id = 0  # the end id of the last block appended to `_log`
        self._log_lock = threading.Lock()

    def close(self) -> None:
        """Stop the writer's I/O threads (after the owner's last flush) and let go of its log
        (a rollover may then delete it once merged)."""
        self._puts.shutdown(wait=True)
        with self._log_lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def release_log(self, high_water: int) -> str | None:
        """Let go of this writer's log if every block in it is below `high_water` (merged),
        so that it can be deleted; the next flush starts a new log. Returns its key."""
        with self._log_lock:
            log = self._log
            if log is None or self._log_end_id > high_water:
                return None
            log.close()
            self._log = None
            return log.key

    def arriving(self) -> None:
        with self._arrival:
            self._arriving += 1

    def arrived(self) -> None:
        with self._arrival:
            self._arriving -= 1
            self._arrival.notify_all()

    def append(
        self, table: pa.Table, sync: bool, announced: bool = False
    ) -> tuple[list[JournalRef], int | None]:
        """Buffer events in a journal; flush it if full or `sync`. Sync writers join a journal
        whose flush is in flight (their batches share the next flush), others go round robin.
        `announced`: the caller called `arriving()` first.

        Returns the journals this call flushed and, with `sync`, the first id of the batch
        (its ids are consecutive: it is written whole into one journal)."""
        try:
            buf = None
            if sync:
                buf = next((b for b in self._buffers if b.io.locked()), None)
            if buf is None:
                buf = self._buffers[next(self._next) % len(self._buffers)]
            with buf.lock:
                if not buf.tables:
                    buf.since = time.monotonic()
                seq = buf.next_seq
                buf.next_seq += 1
                buf.tables.append(table)
                buf.seqs.append(seq)
                buf.rows += table.num_rows
                full = buf.rows >= self._max_events
                if sync:
                    buf.waiting.add(seq)
        finally:
            if announced:
                self.arrived()
        if not (sync or full):
            return [], None
        done: list[JournalRef] = []
        with buf.io:
            if sync and buf.durable <= seq:
                self._gather()
            if not sync or buf.durable <= seq:
                done = self._flush_io(buf)
        if not sync:
            return done, None
        with buf.lock:
            return done, buf.ids.pop(seq)

    def _gather(self) -> None:
        """Leader (journal I/O lock held): wait, at most `sync_wait_s`, for sync writers
        already converting their batches, so that one flush carries them too."""
        if self._sync_wait_s <= 0:
            return
        deadline = time.monotonic() + self._sync_wait_s
        with self._arrival:
            while self._arriving and (left := deadline - time.monotonic()) > 0:
                self._arrival.wait(left)

    def flush(self, older_than: float | None = None) -> list[JournalRef]:
        """Flush every journal (or those buffered longer than `older_than` seconds)."""
        out = []
        now = time.monotonic()
        for buf in self._buffers:
            with buf.lock:
                if buf.pending is None and (
                    not buf.tables or (older_than is not None and now - buf.since < older_than)
                ):
                    continue
            with buf.io:
                out += self._flush_io(buf)
        return out

    def buffered(self) -> int:
        return sum(b.rows for b in self._buffers)

    def _flush_io(self, buf: _Buffer) -> list[JournalRef]:
        """Write the failed flush, if any, then everything buffered (buf.io held)."""
        done = []
        if buf.pending is not None:
            done.append(self._put(buf, buf.pending))
        with buf.lock:
            tables, seqs = buf.tables, buf.seqs
            buf.tables, buf.seqs, buf.rows = [], [], 0
        if not tables:
            return done
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        try:
            first, with_ids, data = self._allocate_and_encode(table)
        except BaseException:
            with buf.lock:  # nothing was written: the batches stay buffered, in order
                buf.tables, buf.seqs = tables + buf.tables, seqs + buf.seqs
                buf.rows += table.num_rows
            raise
        crash.point("provenance.journal.allocated")
        end = first + table.num_rows
        batches, at = [], first
        for s, t in zip(seqs, tables, strict=True):
            batches.append((s, at))
            at += t.num_rows
        key = journal_key(first, end)
        buf.pending = _Pending(key, data, JournalRef(first, end, key, len(data)), batches)
        done.append(self._put(buf, buf.pending, with_ids))
        return done

    def _allocate_and_encode(self, table: pa.Table) -> tuple[int, pa.Table, bytes]:
        """Take the ids (one CAS) and encode the journal with them. When the allocator can
        tell which ids it will hand out (no other writer took some since our last CAS), the
        journal is encoded with those while the CAS is in flight, and again only if it was
        wrong."""
        guess = self._allocator.guess()
        if guess is None:
            first = self._allocator.allocate(table.num_rows)
            with_ids = assign_ids(table, first)
            return first, with_ids, encode_journal(with_ids, self._compression)
        taking = self._puts.submit(self._allocator.allocate, table.num_rows)
        try:
            with_ids = assign_ids(table, guess)
            data = encode_journal(with_ids, self._compression)
        finally:
            first = taking.result()  # raises what the CAS raised
        if first != guess:
            with_ids = assign_ids(table, first)
            data = encode_journal(with_ids, self._compression)
        return first, with_ids, data

    def _write(self, p: _Pending) -> JournalRef:
        """Make the flush durable: a block of the writer's log, or one object."""
        if self._log_bytes > 0:
            ref = self._append(p)
            if ref is not None:
                return ref
        try:
            self._store.put_if_absent(p.key, p.data)
        except Conflict as exc:
            # Our ids are ours alone, so an existing object is our own earlier attempt.
            if self._store.get(p.key) != p.data:
                raise ProvenanceConflict(f"journal {p.key} exists with other contents") from exc
        return p.ref

    def _append(self, p: _Pending) -> JournalRef | None:
        """Append the flush to this writer's log (None: the store cannot append). A failed
        append closes the log, so the retry goes into a new one."""
        with self._log_lock:
            log = self._log
            if log is None or log.closed:
                log = self._store.open_append_log(log_key(p.ref.first_id, uuid.uuid4().hex[:12]))
                if log is None:
                    self._log_bytes = 0
                    return None
                self._log = log
            block = log.append(p.data, (p.ref.first_id, p.ref.end_id))
            self._log_end_id = p.ref.end_id
            if log.end >= self._log_bytes:
                log.close()  # the next flush starts a new log; this one can go once merged
                self._log = None
        return block_ref(log.key, block.offset, block.length, p.ref.first_id, p.ref.end_id)

    def _put(self, buf: _Buffer, p: _Pending, table: pa.Table | None = None) -> JournalRef:
        prepared = None
        if table is None or self._prepare is None:
            ref = self._write(p)
        else:
            writing = self._puts.submit(self._write, p)
            try:
                prepared = self._prepare(table)
            finally:
                ref = writing.result()  # raises what the write raised: nothing reported durable
        crash.point("provenance.journal.written")
        buf.pending = None
        with buf.lock:
            for s, first in p.batches:
                if s in buf.waiting:
                    buf.waiting.discard(s)
                    buf.ids[s] = first
            buf.durable = max(buf.durable, p.batches[-1][0] + 1)
        self._on_flushed(ref, table, prepared)
        return ref
