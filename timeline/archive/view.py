"""Archival as the active-timeline loader sees it (see timeline/loader.py).

Archival deletes instant objects but never the commit log. `ArchiveSnapshot` tells the
loader which log positions the manifest archived (so they count as present) and gives it the
archive checkpoint (archived entries) to fold into the table state, so files written by
archived commits stay visible. It reads the manifest and the checkpoint, never an archive
file. See docs/archival.md, "Loader integration".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from storage import NotFound, ObjectStore

from ..instant import CLEAN
from ..loader import ActiveView, fold_state
from ..loader import load_active as load_view
from ..metadata import Entry
from ..snapshot import TableState
from ..store import Listing, TimelineStore
from .format import decode_json, encode_json
from .manifest import Manifest, read_manifest

CHECKPOINT_FORMAT = "flowledger.archive-checkpoint/1"


@dataclass(frozen=True)
class ArchiveSnapshot:
    """The loader's `ArchivedLog` from one read of the manifest."""

    store: ObjectStore
    manifest: Manifest
    #: The checkpoint's entries once read (one GET per snapshot: the loader may ask twice).
    _cache: dict[str, list[Entry]] = field(default_factory=dict, compare=False, repr=False)

    def archived_range(self, seq: int) -> tuple[int, int] | None:
        return self.manifest.archived_range(seq)

    def is_archived(self, seq: int | None) -> bool:
        return self.manifest.is_archived(seq)

    def archived_entries(self) -> list[Entry]:
        return list(self._read())

    def archived_completion(self, time: str, action: str) -> bool:
        newest = self.manifest.newest_time
        if not newest or time > newest:
            return False  # newer than every archived instant: nothing to read
        return any(e.time == time and e.action == action for e in self._read())

    def _read(self) -> list[Entry]:
        """The checkpoint's entries, read once."""
        got = self._cache.get("entries")
        if got is None:
            got = self._cache["entries"] = read_checkpoint(self.store, self.manifest)[0]
        return got


def archived_log(store: ObjectStore) -> ArchiveSnapshot | None:
    """The tables' `ArchiveSource`: what the manifest archived (None: nothing yet)."""
    manifest = read_manifest(store)
    return ArchiveSnapshot(store, manifest) if manifest.archived_seqs else None


def manifest_of(view: ActiveView) -> Manifest:
    """The manifest a view was loaded with (empty if it was loaded without one)."""
    a = view.archived
    return a.manifest if isinstance(a, ArchiveSnapshot) else Manifest()


def load_active(
    tl: TimelineStore, manifest: Manifest | None = None, listing: Listing | None = None
) -> ActiveView:
    """One LIST of the instants (unless `listing` is given), the manifest, a probe of the log
    tail; archived positions are present.

    The manifest is read after the LIST (see loader.load_active). Pass `manifest` only if no
    run was pending when it was read, or if it was read after `listing` was made (then both
    are used as they are: no request).
    """
    if listing is None:
        listing = tl.list_instants()
    m = manifest if manifest is not None else read_manifest(tl.store)
    return load_view(tl, listing, ArchiveSnapshot(tl.store, m))


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
    return fold_state(tl, view if view is not None else load_active(tl))


def cleaner_state(tl: TimelineStore, view: ActiveView) -> TableState:
    """What the planner needs: every clean (archived and active), without reading the
    metadata of every active commit (one GET per clean instead of per instant)."""
    archived = view.archived.archived_entries() if view.archived is not None else []
    cleans = [e for e in archived if e.action == CLEAN]
    cleans += [e for e in view.log_entries if e.action == CLEAN]
    seen = {e.seq for e in cleans}
    for i in view.timeline.completed().actions(CLEAN):
        if i.seq not in seen:
            cleans.append(tl.entry_of(i))
    return TableState.fold(cleans)
