"""The active-timeline loader: the one place that turns a listing of the instants folder and
the tail of the commit log into the active timeline and the table state.

A commit-log position without a completed object is a completion not materialized yet (a
crashed or racing writer), unless archival removed that instant: archival deletes instant
objects but never the log. The loader is told which positions are archived by an
`ArchivedLog` (the archive package implements it from its manifest and checkpoint; the
loader never imports it) and then counts them as present and folds their entries into the
table state, so files written by archived commits stay visible. See docs/archival.md,
"Loader integration", and docs/architecture.md, "Timeline seams".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from storage import NotFound, ObjectStore

from .active import Timeline, latest_states
from .instant import COMPLETES_AS, Instant, parse_name
from .metadata import Entry
from .snapshot import TableState
from .store import Listing, TimelineStore


class ArchivedLog(Protocol):
    """Log positions whose instant objects archival deleted, and their entries."""

    def archived_range(self, seq: int) -> tuple[int, int] | None:
        """The archived inclusive range holding `seq`, if any."""
        ...

    def is_archived(self, seq: int | None) -> bool: ...

    def archived_entries(self) -> list[Entry]:
        """The archived entries the table state still folds (may cost a GET)."""
        ...

    def archived_completion(self, time: str, action: str) -> bool:
        """Whether an instant of this time completed as `action` and was archived (may
        cost a GET, only for times at or before the newest archived one)."""
        ...


#: Reads what is archived in a table (None: nothing); called after the instants LIST, and
#: only when that listing has a hole (archival always leaves one).
ArchiveSource = Callable[[ObjectStore], ArchivedLog | None]


@dataclass(frozen=True)
class ActiveView:
    """One load of the active timeline."""

    timeline: Timeline
    listing: Listing
    #: Completions found in the log whose completed object is not written yet.
    log_entries: tuple[Entry, ...]
    #: What archival removed (None: nothing, or not looked at because there was no hole).
    archived: ArchivedLog | None = None
    #: Listed pending states of instants whose completion was archived: never pending. A
    #: LIST taken before the instant completed (its completion and archival can both land
    #: before the manifest is read), or a compaction's plan objects left beside its archived
    #: commit (it completes under another name); archival deletes them.
    superseded: tuple[Instant, ...] = ()

    @property
    def max_seq(self) -> int:
        return max([self.listing.max_seq, *(e.seq for e in self.log_entries)])


def load_active(tl: TimelineStore, listing: Listing, archived: ArchivedLog | None) -> ActiveView:
    """The active timeline from `listing` plus a probe of the log tail (usually one GET).

    `archived` must have been read after `listing` was made: a LIST is not a snapshot and an
    archival run deleting oldest-first may overtake it, but every instant it deletes is
    archived before the first deletion, so dropping the instants archived there leaves
    exactly the unarchived ones (no hole)."""
    scan_from = listing.scan_from if archived is None else _scan_from(listing, archived)
    entries = tuple(_log_tail(tl, listing, archived, scan_from))
    return _view(tl, listing, entries, archived)


def rebase(tl: TimelineStore, view: ActiveView | None, listing: Listing) -> ActiveView:
    """`view` with a newer listing of the instants folder, keeping its log entries and
    archive (no request): what a table object knows after a LIST without a full reload."""
    entries = view.log_entries if view is not None else ()
    archived = view.archived if view is not None else None
    return _view(tl, listing, entries, archived)


def _view(
    tl: TimelineStore,
    listing: Listing,
    entries: tuple[Entry, ...],
    archived: ArchivedLog | None,
) -> ActiveView:
    """Listed instants minus those undone by a logged rollback/restore or archived, plus the
    completions found in the log; pending states of an archived completion are dropped.

    A listed pending state carries no log position, so the archived positions cannot drop
    it: an instant listed while pending that completed and was archived before the manifest
    was read would otherwise stay pending here (and hide its archived completion from a
    combined view). `archived_completion` tells, reading the checkpoint only for a pending
    instant no newer than the newest archived one (a live write is newer: archival never
    passes the earliest pending instant it sees)."""
    gone = {(parse_name(n).time, parse_name(n).action) for e in entries for n in e.rolled_back}
    merged: dict[tuple[str, str], Instant] = {
        (i.time, i.action): i
        for i in listing.timeline
        if (i.time, i.action) not in gone and not (archived and archived.is_archived(i.seq))
    }
    merged.update({(e.time, e.action): tl.completed_instant(e) for e in entries})
    instants = latest_states(merged.values())  # a logged compaction commit ends its plan
    superseded = tuple(
        i
        for i in instants
        if archived is not None
        and i.is_pending
        and archived.archived_completion(i.time, COMPLETES_AS.get(i.action, i.action))
    )
    if superseded:
        instants = [i for i in instants if i not in superseded]
    return ActiveView(Timeline.of_sorted(instants), listing, entries, archived, superseded)


def _scan_from(listing: Listing, archived: ArchivedLog) -> int:
    """The position before the first one neither listed nor archived (from the bottom, as a
    completion may sit below every object; archived ranges are jumped)."""
    top = listing.max_seq
    s = 1
    while s < top:
        if s in listing.present:
            s += 1
            continue
        span = archived.archived_range(s)
        if span is None:
            return s - 1
        s = span[1] + 1
    return top


def _log_tail(
    tl: TimelineStore, listing: Listing, archived: ArchivedLog | None, scan_from: int
) -> list[Entry]:
    """Log entries after `scan_from` that no instant object or archived range accounts for.

    The log is gapless by construction (a writer tries position p+1 only after reading p), so
    positions are probed with GETs up to the first free one above the newest listed: one GET
    on the usual load. A LIST with `start_after` would cost as much in requests, but its time
    grows with the log folder (never shrunk, archival or not) on MinIO and the local FS."""
    out: list[Entry] = []
    top = listing.max_seq
    s = scan_from + 1
    while True:
        if s <= top and s in listing.present:
            s += 1
            continue
        span = archived.archived_range(s) if archived is not None else None
        if span is not None:
            s = span[1] + 1
            continue
        try:
            out.append(tl.log.entry(s))
        except NotFound:
            if s > top:
                return out
            if archived is not None:
                raise  # a taken position below the newest one cannot be missing
        s += 1


def fold_state(tl: TimelineStore, view: ActiveView) -> TableState:
    """Table state = archived entries + the active completions, in log order."""
    by_seq: dict[int, Entry] = {}
    if view.archived is not None:
        by_seq.update({e.seq: e for e in view.archived.archived_entries()})
    by_seq.update({e.seq: e for e in view.log_entries})
    todo = [i for i in view.timeline.completed() if i.seq is not None and i.seq not in by_seq]
    for e in tl.entries_of(todo):
        by_seq[e.seq] = e
    return TableState.fold(by_seq.values())


__all__ = [
    "ActiveView",
    "ArchiveSource",
    "ArchivedLog",
    "fold_state",
    "load_active",
    "rebase",
]
