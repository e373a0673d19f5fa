"""What a table object knows of its timeline, and how it learns more: `table.instants`.

The plumbing the commit path, recovery, archival and keyed services share (the last listing
of the instants folder, the full view with the log tail and the archive, the newest log
position, the instants this object began and completed) lives here rather than on `Table`,
whose public surface is the data operations a user calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .active import Timeline
from .loader import ActiveView, ArchiveSource, load_active, rebase
from .metadata import Entry
from .store import Listing, TimelineStore


class TableInstants:
    """A table object's view of its instants: listed (one LIST) or fully loaded (the log
    probe, and the archive manifest when a hole needs it)."""

    def __init__(
        self,
        tl: TimelineStore,
        archive: ArchiveSource | None,
        on_commit: Callable[[Entry], None],
    ) -> None:
        """`archive` reads what archival removed (None: ignore archival); `on_commit` runs
        the table's post-commit hooks after `committed` noted an entry."""
        self.tl = tl
        self.archive = archive
        self._on_commit = on_commit
        self._lock = threading.Lock()
        self._latest = 0
        self._listing: Listing | None = None
        self._listed_at = 0.0  # time.monotonic() of `_listing`
        self._view: ActiveView | None = None
        #: (log position, instant time, schema JSON) of the newest write this object completed
        self.noted_schema: tuple[int, str, Any] | None = None
        self._completed_since_listing: list[Entry] = []  # by this object, after `_listing`
        #: whether a full load (log probe, archive) ever ran; until then `_view` is the listing
        self._full = False
        self._begun: set[str] = set()  # instant times this object began

    # -- positions ------------------------------------------------------------------------------
    @property
    def latest_seq(self) -> int:
        """The newest log position this table object knows of."""
        with self._lock:
            return self._latest

    def _advance(self, seq: int) -> None:
        with self._lock:
            self._latest = max(self._latest, seq)

    def changed_since(self, seq: int) -> bool:
        """Whether any instant completed after log position `seq` (one HEAD of the next
        position: the commit log is gapless, see commit_log.py)."""
        return self.tl.log.exists(seq + 1)

    # -- what this object began and completed ---------------------------------------------------
    def began(self, instant_time: str) -> None:
        """This object began `instant_time`: its pending state does not force a full load
        for planning, and the listing before it is no longer fresh."""
        self._begun.add(instant_time)
        self._listed_at = 0.0

    def discard(self, instant_time: str) -> None:
        """`instant_time` is no longer pending by this object (completed or rolled back)."""
        self._begun.discard(instant_time)

    def note_completed(self, e: Entry) -> None:
        self._advance(e.seq)
        if e.metadata.get("schema") is not None:  # this object's newest stated schema
            self.noted_schema = (e.seq, e.time, e.metadata["schema"])
        with self._lock:
            self._completed_since_listing.append(e)
        self._begun.discard(e.time)

    def committed(self, entry: Entry) -> None:
        """Called by the commit path once `entry` is durable: note it, run the hooks."""
        self.note_completed(entry)
        self._on_commit(entry)

    # -- what is known without a request --------------------------------------------------------
    @property
    def log_entries(self) -> tuple[Entry, ...]:
        """Completions the last refresh found in the commit log whose completed object is
        not written yet (a crashed or racing writer; recovery materializes them)."""
        view = self._view
        return view.log_entries if view is not None else ()

    def known_timeline(self) -> tuple[Timeline, tuple[Entry, ...]]:
        """What this object knows without a request: the timeline of its last listing (read
        it once if it never listed) and the instants it completed itself since then."""
        view = self._view  # after `load`: the listing alone (no log probe yet)
        timeline = view.timeline if view is not None else self.view(refresh=False).timeline
        with self._lock:
            return timeline, tuple(self._completed_since_listing)

    def planning_timeline(self) -> Timeline:
        """The timeline a write plans on (its schema), without a request when possible: the
        last listing alone while it shows no pending instant but this object's own. A
        completion lacking its completed object is pending in any listing (its requested
        object exists from before it takes its log position until its completed object
        does, or until archival records it), so then the log tail holds nothing newer than
        the listing; otherwise the full view (log tail, archive manifest) is loaded."""
        listing = self._listing
        if self._full or listing is None:
            return self.view(refresh=False).timeline
        if any(i.time not in self._begun for i in listing.timeline.pending()):
            return self.view(refresh=False).timeline
        return listing.timeline

    def fresh_listing(self, max_age_s: float) -> Listing | None:
        """The last listing if it is at most `max_age_s` old and no instant was begun since."""
        listing = self._listing
        if listing is None or time.monotonic() - self._listed_at > max_age_s:
            return None
        return listing

    # -- loading --------------------------------------------------------------------------------
    def load(self) -> Listing:
        """One paged LIST of the instants folder (no log LIST): what `begin` needs."""
        listing = self.tl.list_instants()
        self._listing = listing
        self._listed_at = time.monotonic()
        with self._lock:
            self._completed_since_listing = []
        self._view = rebase(self.tl, self._view, listing)
        self._advance(listing.max_seq)
        return listing

    def refresh(self) -> Listing:
        """Reload: LIST instants, then probe the log after the newest completed instant (GETs,
        usually one) to find completions whose completed object is not written yet (a crashed
        or racing writer).

        A hole below the newest completed object is a crashed completion or archival (which
        deletes oldest first, so it always leaves one): only then is `archive` asked what was
        archived (the manifest, read after the LIST as the loader needs; see loader.py)."""
        self._view = None
        return self._complete(self.load())

    def _complete(self, listing: Listing) -> Listing:
        """The rest of a load after the LIST: the log probe, and the archive when needed."""
        archived = None
        if self.archive is not None and listing.scan_from < listing.max_seq:
            archived = self.archive(self.tl.store)
        view = load_active(self.tl, listing, archived)
        self._view = view
        self._full = True
        self._advance(view.max_seq)
        return view.listing

    def view(self, refresh: bool = True) -> ActiveView:
        """The full view: reloaded with `refresh`, else completed from the last listing."""
        if refresh or self._listing is None:
            self.refresh()
        elif not self._full:
            self._complete(self._listing)
        assert self._view is not None
        return self._view


__all__ = ["TableInstants"]
