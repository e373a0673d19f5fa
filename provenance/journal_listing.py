"""The unmerged journals, listed once and reused while their folder is unchanged.

A reader's snapshot needs every journal above the high-water mark, other processes' too, so
each search used to LIST the journal prefix: with 1,000 unmerged journals that LIST (and a
stat per journal on the local backend) was most of a lookup. Where the backend can vouch that
a folder's keys are unchanged (`ObjectStore.folder_version`: the local filesystem), the last
listing is reused, filtered by the fresh high-water mark; any journal added or deleted, by any
process, changes the token and the next snapshot lists again. Object stores give no token
and are listed every time, as before. An append-only log (local backend) keeps its name while
it grows, so a reused listing still reads each log on from where it stopped (one small read
per log when nothing was appended).
"""

from __future__ import annotations

import threading

from storage import ObjectInfo, ObjectStore

from . import staging
from .journal_logs import LogIndex
from .layout import JOURNALS, JournalRef
from .rollover import list_journals_and_logs, unique

Listed = list[tuple[JournalRef, ObjectInfo]]
#: (folder token, high-water mark, listing, append-only logs): see `JournalListing._last`.
LastListing = tuple[str, int, Listed, list[ObjectInfo]]


class JournalListing:
    def __init__(
        self,
        store: ObjectStore,
        manifests: staging.Manifests | None = None,
        logs: LogIndex | None = None,
    ) -> None:
        self._store = store
        self._manifests = manifests
        self._logs = logs or LogIndex()
        self._lock = threading.Lock()
        #: (folder token before the LIST, the high-water mark it listed from, the listing,
        #: the append-only logs it found: they grow without changing the token)
        self._last: LastListing | None = None
        #: ((token, high-water mark, blocks per log), the listing they gave): see `_reuse`.
        self._memo: tuple[tuple[str, int, tuple[int, ...]], Listed] | None = None

    def list(self, high_water: int) -> Listed:
        """Journals with ids at or above `high_water` (see rollover.list_journals)."""
        version = self._store.folder_version(JOURNALS)
        if version is not None:
            with self._lock:
                last = self._last
            if last is not None and last[0] == version and last[1] <= high_water:
                return self._reuse(version, high_water, last)
        listed, logs = list_journals_and_logs(self._store, high_water, self._manifests, self._logs)
        if version is not None:
            with self._lock:
                self._last = (version, high_water, listed, logs)
                self._memo = None
        return listed

    def _reuse(self, version: str, high_water: int, last: LastListing) -> Listed:
        """The last listing, with what the logs gained since. When nothing changed (same
        token, same high-water mark, no log grew) the very same list is returned, so a
        lookup's snapshot costs no pass over the unmerged journals."""
        blocks = [(info, self._logs.blocks(self._store, info.key)) for info in last[3]]
        shape = (version, high_water, tuple(len(b) for _, b in blocks))
        with self._lock:
            memo = self._memo
        if memo is not None and memo[0] == shape:
            return memo[1]
        kept = [(r, i) for r, i in last[2] if r.first_id >= high_water and r.log is None]
        for info, found in blocks:
            kept += [(b, info) for b in found if b.first_id >= high_water]
        out = unique(sorted(kept, key=lambda p: p[0].first_id))
        with self._lock:
            self._memo = (shape, out)
        return out

    def forget(self) -> None:
        """List again next time (a journal was found missing or deleted)."""
        with self._lock:
            self._last = None
            self._memo = None
