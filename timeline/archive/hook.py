"""Automatic archival after a completed instant (Hudi's autoArchiveOnCommit).

`configure(table, settings)` attaches archival settings to a table object; the table's
commit path calls `after_commit(table)` once per completed instant. The automatic run never
merges (merging reads archive files; reading the archive is never on the commit path) and
never fails the commit it follows: the commit is already durable.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import TYPE_CHECKING

from storage import StorageError

from ..errors import TimelineError
from .settings import ArchivalSettings

if TYPE_CHECKING:
    from ..table import Table

log = logging.getLogger(__name__)
_settings: weakref.WeakKeyDictionary[Table, ArchivalSettings] = weakref.WeakKeyDictionary()
_running: weakref.WeakKeyDictionary[Table, threading.Thread] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def configure(table: Table, settings: ArchivalSettings | None) -> None:
    """Attach (or with None, detach) archival settings to a table object."""
    with _lock:
        if settings is None:
            _settings.pop(table, None)
        else:
            _settings[table] = settings


def archival_settings(table: Table) -> ArchivalSettings | None:
    with _lock:
        return _settings.get(table)


def after_commit(table: Table) -> None:
    s = archival_settings(table)
    if s is None or not s.auto_archive:
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
        Archiver(table, s).run(merge=merge)
    except (TimelineError, StorageError) as exc:  # a conflict means another archiver runs
        log.warning("automatic archival of %s skipped: %s", table.uri, exc)
