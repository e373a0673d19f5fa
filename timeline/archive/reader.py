"""The archived timeline: lazy, loads only archive files whose instant-time range overlaps
the request (ranges come from the manifest, so no LIST and no file is opened to find them),
and a combined view (archived + active) that answers the active timeline's queries.
Nothing here is on the commit path."""

from __future__ import annotations

import contextlib
import gc
import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import TYPE_CHECKING

from storage import NotFound, ObjectStore

from ..active import Timeline
from ..instant import Instant, State
from ..metadata import Entry
from ..store import TimelineStore
from .errors import ArchiveError
from .format import ArchivedInstant, decode_archive, dedupe
from .manifest import ArchiveFile, Manifest, read_manifest
from .view import load_active, manifest_of

if TYPE_CHECKING:
    from ..table import Table


class ArchivedTimeline:
    def __init__(
        self, store: ObjectStore, manifest: Manifest | None = None, parallelism: int = 8
    ) -> None:
        self.store = store
        self.manifest = manifest if manifest is not None else read_manifest(store)
        self.parallelism = parallelism
        self._lock = threading.Lock()
        self._cache: dict[str, list[ArchivedInstant]] = {}  # key -> records (with bodies)
        self._names: dict[str, list[ArchivedInstant]] = {}  # key -> records without bodies

    def reload(self) -> None:
        """Re-read the manifest (files merged meanwhile); cached files stay valid."""
        self.manifest = read_manifest(self.store)

    def files(self, start: str | None = None, end: str | None = None) -> list[ArchiveFile]:
        return [f for f in self.manifest.files if f.overlaps(start, end)]

    def records(
        self, start: str | None = None, end: str | None = None, with_bodies: bool = False
    ) -> list[ArchivedInstant]:
        """Archived instants with start <= time <= end, one per (time, action), time-ordered."""
        with _no_gc():
            return self._records(start, end, with_bodies)

    def _records(
        self, start: str | None, end: str | None, with_bodies: bool
    ) -> list[ArchivedInstant]:
        for attempt in range(3):
            files = sorted(self.files(start, end), key=lambda f: (f.min_time, f.max_time))
            try:
                loaded = self._load(files, with_bodies)
                break
            except NotFound:
                if attempt == 2:
                    raise
                self.reload()  # a merge replaced files between our manifest read and GET
        out: list[ArchivedInstant] = []
        for f, recs in zip(files, loaded, strict=True):
            inside = (start is None or f.min_time >= start) and (end is None or f.max_time <= end)
            out += recs if inside else [r for r in recs if _within(r.time, start, end)]
        disjoint = all(a.max_time < b.min_time for a, b in itertools.pairwise(files))
        # Each file is written time-ordered with one record per instant: files whose ranges do
        # not overlap (the usual case) concatenate into an ordered, duplicate-free list.
        return out if disjoint else dedupe(out)

    def _load(self, files: list[ArchiveFile], with_bodies: bool) -> list[list[ArchivedInstant]]:
        cache = self._cache if with_bodies else self._names
        with self._lock:
            hits = {f.key: self._cache.get(f.key) or cache.get(f.key) for f in files}
        missing = [f for f in files if hits[f.key] is None]
        if len(missing) > 1 and not self.store.url().startswith("file:"):
            with ThreadPoolExecutor(
                min(self.parallelism, len(missing)), "flowledger-archive-read"
            ) as pool:
                blobs = list(pool.map(lambda f: f.read(self.store), missing))  # I/O + CRC
        else:
            blobs = [f.read(self.store) for f in missing]
        for f, blob in zip(missing, blobs, strict=True):  # decoding is CPU: one thread
            recs = decode_archive(blob, self.store.url(f.key), with_bodies)
            hits[f.key] = recs
            with self._lock:
                cache[f.key] = recs
        return [hits[f.key] or [] for f in files]

    def instant_times(self, start: str | None = None, end: str | None = None) -> list[str]:
        return [r.time for r in self.records(start, end)]

    def timeline(self, start: str | None = None, end: str | None = None) -> Timeline:
        # records come time-ordered, one per (time, action): no re-sort of 100,000 instants
        records = self.records(start, end)
        with _no_gc():
            return Timeline.of_sorted(map(_trusted, records))

    def entry(self, time: str, action: str | None = None) -> Entry:
        """The commit metadata of an archived instant."""
        for r in self.records(time, time, with_bodies=True):
            if action is None or r.action == action:
                return r.entry(self.store.url(self.manifest_key_of(r)))
        raise ArchiveError(f"no archived instant {time} in {self.store.url()}")

    def manifest_key_of(self, r: ArchivedInstant) -> str:
        return next((f.key for f in self.files(r.time, r.time)), "")


def combined_timeline(
    table: Table | TimelineStore, start: str | None = None, end: str | None = None
) -> Timeline:
    """Archived + active instants; same queries as the active timeline.

    The archived part is read with the manifest the active view was loaded with (read after
    its LIST: a run commits the manifest before deleting anything, so an instant missing
    from that LIST is in this manifest's files). A merge may replace those files before they
    are read; the archive then answers from a newer manifest, which may also hold instants
    that completed after the view was loaded, where the view still shows them pending. An
    instant's state only advances, so for one seen in both the more advanced state wins (the
    active one when both are completed, as during the deletion step of a run): a stale
    pending state never hides a completion."""
    tl = table if isinstance(table, TimelineStore) else table.tl
    view = load_active(tl)
    archived = ArchivedTimeline(tl.store, manifest_of(view)).timeline(start, end)
    merged: dict[tuple[str, str], Instant] = {(i.time, i.action): i for i in archived}
    for i in view.timeline:
        if (start is None or i.time >= start) and (end is None or i.time <= end):
            seen = merged.get((i.time, i.action))
            if seen is None or i.state.rank >= seen.state.rank:
                merged[(i.time, i.action)] = i
    return Timeline(merged.values())


_STATES = MappingProxyType({s.value: s for s in State})


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No cyclic GC while building 100,000s of small acyclic objects: each allocation burst
    triggers collections that walk every live object (more than half of a 100k-instant load
    in a profile). Restores the previous state; a concurrent user only loses the speed-up."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _trusted(r: ArchivedInstant) -> Instant:
    """An Instant without re-validating its time: archive records were validated when they
    were instants (parsing 100,000 times would dominate loading the archive)."""
    i = object.__new__(Instant)
    object.__setattr__(i, "time", r.time)
    object.__setattr__(i, "action", r.action)
    object.__setattr__(i, "state", _STATES[r.state])
    object.__setattr__(i, "seq", r.seq)
    return i


def _within(t: str, start: str | None, end: str | None) -> bool:
    return (start is None or t >= start) and (end is None or t <= end)
