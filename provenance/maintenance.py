"""Keeping a writing repository merged: the backlog of unmerged journals, NiFi's rollover by
time (`rollover_time_s`) and size (`rollover_size`), and the maintenance thread that runs it
(with the flush of buffered journals) on its own."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable

from storage import ObjectStore, ProgressCallback

from .errors import ProvenanceConflict
from .layout import JournalRef
from .rollover import RolloverResult, Verify, rollover_once
from .settings import ProvenanceSettings
from .staging import Manifests
from .table import ProvenanceTable

log = logging.getLogger("flowledger.provenance")
#: Rollover races lost in a row before giving up (each loss means another process merged).
MAX_LOST_RACES = 50


class Backlog:
    """Journals flushed (or found) and not merged yet, and when the last rollover ran."""

    def __init__(self) -> None:
        self._refs: dict[str, JournalRef] = {}
        #: Their total size, kept as they come and go: every write asks for it.
        self._bytes = 0
        self.lock = threading.Lock()
        self.last_rollover = time.monotonic()

    def add(self, ref: JournalRef) -> None:
        with self.lock:
            old = self._refs.get(ref.key)
            self._bytes += ref.size - (old.size if old is not None else 0)
            self._refs[ref.key] = ref

    def __len__(self) -> int:
        return len(self._refs)

    def bytes(self) -> int:
        return self._bytes

    def drop_upto(self, end_id: int) -> None:
        """Forget journals merged (ids below `end_id`)."""
        with self.lock:
            for key in [k for k, j in self._refs.items() if j.end_id <= end_id]:
                self._bytes -= self._refs.pop(key).size

    def falling_behind(self, settings: ProvenanceSettings) -> bool:
        """Unmerged journals over `max_journal_backlog` (logged: writers roll over first)."""
        backlog = self._bytes
        if backlog < settings.max_journal_backlog:
            return False
        log.warning(
            "provenance: rollover is falling behind (%d journals, %.1f MiB not merged, "
            "max_journal_backlog=%.1f MiB); slowing writers while it catches up",
            len(self._refs),
            backlog / 2**20,
            settings.max_journal_backlog / 2**20,
        )
        return True

    def due(self, settings: ProvenanceSettings) -> bool:
        if not self._refs:
            return False
        age = time.monotonic() - self.last_rollover
        return age >= settings.rollover_time_s or self.bytes() >= settings.rollover_size


def merge_all(
    store: ObjectStore,
    table: ProvenanceTable,
    settings: ProvenanceSettings,
    backlog: Backlog,
    progress: ProgressCallback | None = None,
    verify: Verify | None = None,
    manifests: Manifests | None = None,
) -> RolloverResult:
    """Roll over contiguous runs of journals until none is left (the caller holds the
    repository's rollover lock and has flushed its journals); `progress` counts journals,
    `verify` checks the listed journals for missing objects (see rollover_once)."""
    started = time.monotonic()
    total = RolloverResult(0, 0, 0, 0, 0, 0.0)
    lost = 0
    while True:
        try:
            r = rollover_once(store, table, settings, progress, total.journals, verify, manifests)
        except ProvenanceConflict as exc:
            # Another process merged these journals first: its commit did our work, so
            # losing the race is not an error; go on from the new high-water mark.
            lost += 1
            if lost > MAX_LOST_RACES:
                raise
            log.info("provenance: rollover lost a race, continuing: %s", exc)
            table.invalidate()
            continue
        if r is None:
            # Journals merged by other processes are no longer ours to roll over.
            backlog.drop_upto(table.committed().high_water)
            break
        backlog.drop_upto(r.end_id)
        total = RolloverResult(
            total.files + 1,
            total.events + r.events,
            total.journals + r.journals,
            total.bytes_in + r.bytes_in,
            total.bytes_out + r.bytes_out,
            0.0,
            r.first_id if total.first_id < 0 else total.first_id,
            r.end_id,
        )
    backlog.last_rollover = time.monotonic()
    return RolloverResult(
        total.files,
        total.events,
        total.journals,
        total.bytes_in,
        total.bytes_out,
        time.monotonic() - started,
        total.first_id,
        total.end_id,
    )


def start_thread(
    owner: object, once: Callable[[object], None], stop: threading.Event, interval: float
) -> threading.Thread:
    """The maintenance thread: `once(owner)` every `interval` seconds (at most 1 s) until
    `stop`. It holds `owner` weakly: a repository dropped without close() lets it end."""
    ref = weakref.ref(owner)

    def loop() -> None:
        while not stop.wait(min(1.0, interval)):
            target = ref()
            if target is None:
                return
            once(target)
            del target

    thread = threading.Thread(target=loop, name="flowledger-provenance-maintenance", daemon=True)
    thread.start()
    return thread
