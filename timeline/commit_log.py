"""The commit log: one create-only object per completion, `_timeline/log/<seq>`.

`CommitLog` is the interface the commit protocol is written against (like delta-rs's
`LogStore`); `ObjectStoreLog` implements it with conditional PUTs on any `ObjectStore`.
Every implementation gives these guarantees, and the timeline relies on nothing else:

1. **Mutual exclusion.** Of all writers calling `take` for the same position, exactly one
   gets True; the others get False and the winner's entry is then readable (and cached).
2. **Gapless.** A writer tries position p + 1 only after reading p, so the taken positions
   are always 1..N; the first position that does not exist ends the log.
3. **Immutable.** A taken position never changes and is never deleted (archival deletes
   instant objects, never the log), so an entry read once may be cached forever.
4. **Outcome resolved.** A `take` whose response was lost reads the position back and
   compares bytes (entries are unique per writer and instant); if that read fails too it
   raises `CommitUnknownOutcome`, never a wrong True or False.
5. **Listing is a hint.** `after(seq)` lists taken positions above `seq`; it may miss the
   newest ones and is used only to catch up, never to decide a conflict.
"""

from __future__ import annotations

import threading
from typing import Protocol

from storage import Conflict, NotFound, ObjectStore, StorageError, UnknownOutcome

from .errors import CommitUnknownOutcome
from .layout import LOG, log_key, log_seq
from .metadata import Entry


class CommitLog(Protocol):
    """The table's serialization point (see the module docstring for the guarantees)."""

    def entry(self, seq: int) -> Entry:
        """The entry at `seq` (storage NotFound if the position is free)."""
        ...

    def exists(self, seq: int) -> bool:
        """Whether position `seq` is taken (one HEAD)."""
        ...

    def take(self, entry: Entry) -> bool:
        """Take position `entry.seq`: True = ours, False = another writer's."""
        ...

    def after(self, seq: int) -> list[int]:
        """Taken positions above `seq`, ascending (a hint; see guarantee 5)."""
        ...

    def cached(self, seq: int) -> Entry | None:
        """The entry at `seq` if this object already read or wrote it (no request)."""
        ...

    def remember(self, entry: Entry) -> None:
        """Cache an entry known to sit at `entry.seq` (e.g. read from its completed object)."""
        ...


class ObjectStoreLog:
    """`CommitLog` on an object store with create-only PUTs (S3 `If-None-Match: *`)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._entries: dict[int, Entry] = {}

    def cached(self, seq: int) -> Entry | None:
        with self._lock:
            return self._entries.get(seq)

    def remember(self, entry: Entry) -> None:
        with self._lock:
            self._entries[entry.seq] = entry

    def entry(self, seq: int) -> Entry:
        cached = self.cached(seq)
        if cached is not None:
            return cached
        data = self.store.get(log_key(seq))
        e = Entry.decode(data, self.store.url(log_key(seq)))
        self.remember(e)
        return e

    def exists(self, seq: int) -> bool:
        return self.store.exists(log_key(seq))

    def after(self, seq: int) -> list[int]:
        start = log_key(seq) if seq > 0 else None
        return [log_seq(o.key) for o in self.store.list(LOG, start_after=start)]

    def take(self, entry: Entry) -> bool:
        """Create-only PUT of log position `entry.seq`. True = ours, False = someone else's.

        An unknown outcome is resolved by reading the position back and checking that it
        names this instant and writer (bodies are unique per writer and instant)."""
        body = entry.encode()
        key = log_key(entry.seq)
        for _ in range(3):
            try:
                self.store.put_if_absent(key, body)
                self.remember(entry)
                return True
            except Conflict:
                # Not ours (the store read back what a retried request left): the winner's.
                return self._owned(key, body, entry)  # the winner's entry is now cached
            except UnknownOutcome:
                # The store read back for as long as its settings allow; one more look,
                # and whatever fails now leaves the outcome unknown (never "unreachable").
                try:
                    return self._owned(key, body, entry)
                except NotFound:
                    continue  # it did not land: a create-only retry is safe
                except StorageError as err:
                    raise self._unknown(entry, key) from err
        raise self._unknown(entry, key)

    def _unknown(self, entry: Entry, key: str) -> CommitUnknownOutcome:
        t = entry.time
        return CommitUnknownOutcome(
            f"commit of instant {t} ({entry.action}) at {self.store.url(key)}: the write was "
            "sent but its answer was lost and reading it back failed (the endpoint did not "
            "answer); it may or may not have completed. Once the endpoint answers, the "
            f"table's timeline tells (`timeline show`): instant {t} completed, or it stays "
            "pending and is rolled back when its heartbeat expires. Check before writing the "
            "same data again",
            t,
        )

    def _owned(self, key: str, body: bytes, entry: Entry) -> bool:
        data = self.store.get(key)
        if data == body:
            self.remember(entry)
            return True
        self.remember(Entry.decode(data, self.store.url(key)))
        return False


__all__ = ["CommitLog", "ObjectStoreLog"]
