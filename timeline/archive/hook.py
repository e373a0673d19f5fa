"""Automatic archival after a completed instant (Hudi's autoArchiveOnCommit).

`configure(table, settings)` attaches archival settings to a table object; tables not
configured use the process default (`ArchivalSettings()`: on, Hudi's 20/30; `set_default(None)`
turns it off, as the CLI's `--no-auto-archive` does). The table's commit path calls
`after_commit(table)` once per completed instant. The automatic run never merges (merging reads
archive files; reading the archive is never on the commit path) and never fails the commit it
follows: the commit is already durable.

A commit that cannot archive anything costs no request: the table object holds the active
timeline of its last listing plus the instants it completed since, and a run starts only once
that count exceeds `keep_max_commits` (pending instants count too: an upper bound; commits of
other writers since the listing are counted by their own writers or the next listing).
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import TYPE_CHECKING

from storage import StorageError

from ..errors import TimelineError
from ..instant import WRITE_ACTIONS
from .planner import SERVICE_ACTIONS
from .settings import ArchivalSettings

if TYPE_CHECKING:
    from ..table import Table

log = logging.getLogger(__name__)
_settings: weakref.WeakKeyDictionary[Table, ArchivalSettings] = weakref.WeakKeyDictionary()
_running: weakref.WeakKeyDictionary[Table, threading.Thread] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_default: ArchivalSettings | None = ArchivalSettings()


def set_default(settings: ArchivalSettings | None) -> None:
    """Settings for tables not `configure`d in this process (None: no automatic archival)."""
    global _default
    with _lock:
        _default = settings


def configure(table: Table, settings: ArchivalSettings | None) -> None:
    """Attach (or with None, detach: back to the process default) archival settings."""
    with _lock:
        if settings is None:
            _settings.pop(table, None)
        else:
            _settings[table] = settings


def archival_settings(table: Table) -> ArchivalSettings | None:
    with _lock:
        return _settings.get(table, _default)


def may_archive(table: Table, s: ArchivalSettings) -> bool:
    """False when the table object's own knowledge shows too few instants for a run to archive
    any (no request; see the module doc)."""
    timeline, since = table.known_timeline()
    commits = sum(1 for i in timeline if i.action in WRITE_ACTIONS)
    commits += sum(1 for e in since if e.action in WRITE_ACTIONS)
    services = sum(1 for i in timeline if i.action in SERVICE_ACTIONS)
    services += sum(1 for e in since if e.action in SERVICE_ACTIONS)
    return max(commits, services) > s.keep_max_commits


def after_commit(table: Table) -> None:
    s = archival_settings(table)
    if s is None or not s.auto_archive or not may_archive(table, s):
        return
    if not s.async_archive:
        _run(table, s, merge=False)
        return
    with _lock:
        busy = _running.get(table)
        if busy is not None and busy.is_alive():
            return  # the running one sees this commit too
        t = threading.Thread(
            target=_run, args=(table, s, s.archive_merge_enable), name="archiver", daemon=True
        )
        _running[table] = t
    t.start()


def wait(table: Table) -> None:
    """Wait for a running asynchronous archival of this table (tests, shutdown)."""
    with _lock:
        t = _running.get(table)
    if t is not None:
        t.join()


def _run(table: Table, s: ArchivalSettings, merge: bool) -> None:
    from .archiver import Archiver

    try:
        result = Archiver(table, s).run(merge=merge)
        if result.file and not s.async_archive:
            table.load_instants()  # one LIST: the counts above drop what was just archived
    except (TimelineError, StorageError) as exc:  # a conflict means another archiver runs
        log.warning("automatic archival of %s skipped: %s", table.uri, exc)
