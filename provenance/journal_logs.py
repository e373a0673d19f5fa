"""The blocks of append-only journal logs (local backend), each read once per process.

Where the store can append (`ObjectStore.open_append_log`), a writer appends each journal flush
as one framed block to its own log (`journals/log-<first>-<writer>.flog`) and `fdatasync`s it,
instead of writing a new object (storage/append_log.py). Every block is one journal: ids
[first, end) in its header, the same Arrow IPC bytes as a journal object as its payload.

A log only grows (one writer, appending) until it is deleted, so the blocks read so far are
kept and a later look reads only from where the valid prefix ended: one small read per log when
nothing was appended. Reading stops at a torn tail (a writer killed mid-append never
acknowledged that block); a damaged block with valid blocks after it is an `IntegrityError`
naming the log and the offset.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from storage import LogBlock, NotFound, ObjectStore, log_reader, read_log_block, scan_log

from .layout import JournalRef, block_ref


def _reader(store: ObjectStore, key: str) -> Callable[[int, int], bytes]:
    return log_reader(lambda offset, length: store.get(key, offset, length))


class LogIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: log key -> (its blocks read so far, the offset where they end)
        self._logs: dict[str, tuple[list[JournalRef], int]] = {}

    def blocks(self, store: ObjectStore, key: str) -> list[JournalRef]:
        """Every whole block of the log (none if it was deleted meanwhile)."""
        with self._lock:
            known, end = self._logs.get(key, ([], 0))
            try:
                found, new_end = scan_log(_reader(store, key), store.url(key), end)
            except NotFound:
                self._logs.pop(key, None)
                return []
            if found:
                known = known + [
                    block_ref(key, b.offset, b.length, b.tag[0], b.tag[1]) for b in found
                ]
            self._logs[key] = (known, new_end)
            return known

    def forget(self, keys: Iterable[str]) -> None:
        with self._lock:
            for k in keys:
                self._logs.pop(k, None)


def read_block(store: ObjectStore, ref: JournalRef) -> bytes:
    """A block's payload, verified (IntegrityError naming the log and the offset)."""
    assert ref.log is not None
    block = LogBlock(ref.offset, ref.size, (ref.first_id, ref.end_id))
    return read_log_block(_reader(store, ref.log), store.url(ref.log), block)


def delete_merged_logs(
    store: ObjectStore, logs: Iterable[str], high_water: int, index: LogIndex | None = None
) -> int:
    """Delete the logs whose blocks are all below `high_water` and that no writer still
    appends to (a live writer's log stays until it moves on to a new one). Returns how many."""
    index = index or LogIndex()
    deleted = []
    for key in dict.fromkeys(logs):
        blocks = index.blocks(store, key)
        if all(b.end_id <= high_water for b in blocks) and store.delete_idle_log(key):
            deleted.append(key)
    index.forget(deleted)
    return len(deleted)
