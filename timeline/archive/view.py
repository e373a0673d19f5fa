"""The active timeline and table state, corrected for archival.

Archival deletes instant objects but never the commit log. The stock loader treats a commit-
log position without a completed object as a completion not materialized yet; an archived
position looks exactly like that. These loaders count the manifest's archived positions as
present, and fold the archive checkpoint (archived entries) into the table state so files
written by archived commits stay visible. They read the manifest and the checkpoint, never an
archive file. See docs/archival.md, "Loader integration".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from storage import NotFound, ObjectStore

from ..active import Timeline
from ..instant import CLEAN, Instant, parse_name
from ..metadata import Entry
from ..snapshot import TableState
from ..store import Listing, TimelineStore
from .format import decode_json, encode_json
from .manifest import Manifest, read_manifest

CHECKPOINT_FORMAT = "flowledger.archive-checkpoint/1"


@dataclass(frozen=True)
class ActiveView:
    timeline: Timeline
    listing: Listing
    #: Completions found in the log whose completed object is not written yet.
    log_entries: tuple[Entry, ...]
    manifest: Manifest


def load_active(tl: TimelineStore, manifest: Manifest | None = None) -> ActiveView:
    """One LIST of the instants, a short LIST of the log tail; archived positions are present.

    The manifest is read after the LIST: a LIST is not a snapshot, and an archival run
    deleting oldest-first may overtake it, but every instant it deletes is in the manifest
    before the first deletion, so dropping the instants that manifest archived leaves exactly
    the unarchived ones (no hole). Pass `manifest` only if no run was pending when it was read.
    """
    listing = tl.list_instants()
    m = manifest if manifest is not None else read_manifest(tl.store)
    top = listing.max_seq
    present = set(listing.present)
    scan_from = top
    s = 1  # from the bottom (as the table loader): a completion may sit below every object
    while s < top:  # the first position neither listed nor archived (jumping archived ranges)
        if s in present:
            s += 1
            continue
        archived = m.archived_range(s)
        if archived is None:
            scan_from = s - 1
            break
        s = archived[1] + 1
    entries = _log_tail(tl, m, present, scan_from, top)
    gone = {(parse_name(n).time, parse_name(n).action) for e in entries for n in e.rolled_back}
    merged: dict[tuple[str, str], Instant] = {
        (i.time, i.action): i
        for i in listing.timeline
        if (i.time, i.action) not in gone and not m.is_archived(i.seq)
    }
    merged.update({(e.time, e.action): tl.completed_instant(e) for e in entries})
    return ActiveView(Timeline(merged.values()), listing, tuple(entries), m)


def _log_tail(
    tl: TimelineStore, m: Manifest, present: set[int], scan_from: int, top: int
) -> list[Entry]:
    """Log entries after `scan_from` not accounted for by an instant object or the archive.

    The log is gapless by construction (a writer tries position p+1 only after reading p), so
    instead of a LIST (which a local filesystem answers by walking the whole, never archived,
    log folder) the positions are probed with GETs until the first one that does not exist:
    one GET on the usual load, whatever the length of the history."""
    out: list[Entry] = []
    s = scan_from + 1
    while True:
        if s <= top and s in present:
            s += 1
            continue
        archived = m.archived_range(s)
        if archived is not None:
            s = archived[1] + 1
            continue
        try:
            out.append(tl.entry(s))
        except NotFound:
            if s > top:
                return out
            raise  # a taken position below the newest one cannot be missing
        s += 1


# -- the archive checkpoint: archived entries the table state still folds ----------------------
def encode_checkpoint(entries: Iterable[Entry]) -> bytes:
    rows = [json.loads(e.encode()) for e in sorted(entries, key=lambda e: e.seq)]
    for r in rows:  # the checkpoint's own crc32 covers its entries
        r.pop("crc32", None)
    return encode_json({"format": CHECKPOINT_FORMAT, "entries": rows})


def decode_checkpoint(data: bytes, where: str) -> list[Entry]:
    d = decode_json(data, where)
    return [
        Entry(
            int(r["seq"]), str(r["instant_time"]), str(r["action"]), str(r["writer"]), r["metadata"]
        )
        for r in d.get("entries", ())
    ]


def read_checkpoint(store: ObjectStore, manifest: Manifest) -> tuple[list[Entry], Manifest]:
    """The checkpoint the manifest names (re-reading the manifest once if a newer run
    replaced and deleted it meanwhile)."""
    m = manifest
    for _ in range(3):
        if not m.checkpoint:
            return [], m
        try:
            return decode_checkpoint(store.get(m.checkpoint), store.url(m.checkpoint)), m
        except NotFound:
            m = read_manifest(store)
    return decode_checkpoint(store.get(m.checkpoint), store.url(m.checkpoint)), m


def table_state(tl: TimelineStore, view: ActiveView | None = None) -> TableState:
    """Table state = archived entries (checkpoint) + active completions, in log order."""
    v = view if view is not None else load_active(tl)
    archived, _ = read_checkpoint(tl.store, v.manifest)
    by_seq: dict[int, Entry] = {e.seq: e for e in archived}
    by_seq.update({e.seq: e for e in v.log_entries})
    for i in v.timeline.completed():
        if i.seq is not None and i.seq not in by_seq:
            by_seq[i.seq] = tl.entry_of(i)
    return TableState.fold(by_seq.values())


def cleaner_state(tl: TimelineStore, view: ActiveView) -> TableState:
    """What the planner needs: every clean (archived and active), without reading the
    metadata of every active commit (one GET per clean instead of per instant)."""
    archived, _ = read_checkpoint(tl.store, view.manifest)
    cleans = [e for e in archived if e.action == CLEAN]
    cleans += [e for e in view.log_entries if e.action == CLEAN]
    seen = {e.seq for e in cleans}
    for i in view.timeline.completed().actions(CLEAN):
        if i.seq not in seen:
            cleans.append(tl.entry_of(i))
    return TableState.fold(cleans)
