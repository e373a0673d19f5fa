"""Automatic archival after a completed instant (Hudi's autoArchiveOnCommit), as a
post-commit hook (timeline/hooks.py).

`Table` puts an `AutoArchive` in its `post_commit` list when its settings say so
(`TableSettings.archival.auto_archive`, on by default with Hudi's 20/30; the CLI's
`--no-auto-archive` turns it off). The automatic run never merges (merging reads archive
files; reading the archive is never on the commit path) and never fails the commit it
follows: the commit is already durable.

A commit that cannot archive anything costs no request: the table object holds the active
timeline of its last listing plus the instants it completed since, and a run starts only once
that count exceeds `keep_max_commits` (pending instants count too: an upper bound; commits of
other writers since the listing are counted by their own writers or the next listing).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from storage import StorageError

from ..errors import TimelineError
from ..hooks import PostCommitHook
from ..instant import WRITE_ACTIONS
from ..settings import ArchivalSettings
from .archiver import Archiver
from .planner import SERVICE_ACTIONS

if TYPE_CHECKING:
    from ..metadata import Entry
    from ..table import Table

log = logging.getLogger(__name__)


def may_archive(table: Table, s: ArchivalSettings) -> bool:
    """False when the table object's own knowledge shows too few instants for a run to archive
    any (no request; see the module doc)."""
    timeline, since = table.instants.known_timeline()
    commits = sum(1 for i in timeline if i.action in WRITE_ACTIONS)
    commits += sum(1 for e in since if e.action in WRITE_ACTIONS)
    services = sum(1 for i in timeline if i.action in SERVICE_ACTIONS)
    services += sum(1 for e in since if e.action in SERVICE_ACTIONS)
    return max(commits, services) > s.keep_max_commits


class AutoArchive:
    """The automatic-archival post-commit hook of one table object."""

    def __init__(self, settings: ArchivalSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._running: threading.Thread | None = None

    def __call__(self, table: Table, entry: Entry | None = None) -> None:
        s = self.settings
        if not s.auto_archive or not may_archive(table, s):
            return
        if not s.async_archive:
            self._run(table, merge=False)
            return
        with self._lock:
            busy = self._running
            if busy is not None and busy.is_alive():
                return  # the running one sees this commit too
            t = threading.Thread(
                target=self._run,
                args=(table, s.archive_merge_enable),
                name="flowledger-archiver",
                daemon=True,
            )
            self._running = t
        t.start()

    def wait(self) -> None:
        """Wait for a running asynchronous archival (tests, shutdown)."""
        with self._lock:
            t = self._running
        if t is not None:
            t.join()

    def _run(self, table: Table, merge: bool) -> None:
        s = self.settings
        try:
            result = Archiver(table, s).run(merge=merge)
            if result.file and not s.async_archive:
                table.instants.load()  # one LIST: the counts above drop what was just archived
        except (TimelineError, StorageError) as exc:  # a conflict means another archiver runs
            log.warning("automatic archival of %s skipped: %s", table.uri, exc)


def post_commit_hooks(settings: ArchivalSettings) -> list[PostCommitHook]:
    """The hooks a table with these archival settings runs after each commit."""
    return [AutoArchive(settings)] if settings.auto_archive else []


def auto_archive_of(table: Table) -> AutoArchive | None:
    """The table object's automatic-archival hook, if it has one."""
    return next((h for h in table.post_commit if isinstance(h, AutoArchive)), None)


__all__ = ["AutoArchive", "auto_archive_of", "may_archive", "post_commit_hooks"]
