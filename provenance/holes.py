"""Missing committed objects: a hole in the event ids is evidence, unless it is an open one.

Event ids are contiguous across committed objects (merged files below the high-water mark,
then journals and staged-ingest manifests above it). The only honest hole is an allocation
whose writer died or failed before its object landed, and the allocator lists every such
allocation as *open* until its writer reports the object written (provenance/ids.py). So a
hole not covered by an open allocation held acknowledged events whose object was deleted:
readers, rollover and recovery raise `MissingEvents` naming the ids and where they should be,
instead of answering without them (see docs/provenance.md, "Missing objects").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from storage import ObjectInfo, ObjectStore

from . import staging
from .errors import MissingEvents
from .ids import AllocatorState, IdAllocator
from .layout import JOURNALS, WIDTH, JournalRef
from .rollover import list_journals
from .table import ProvenanceTable

Range = tuple[int, int]


def gaps(high_water: int, refs: Iterable[JournalRef], end: int | None = None) -> list[Range]:
    """Id ranges in [high_water, end) (end: past the last journal if None) no journal holds."""
    out: list[Range] = []
    expected = high_water
    for ref in sorted(refs, key=lambda r: r.first_id):
        if ref.end_id <= expected:
            continue
        if ref.first_id > expected:
            out.append((expected, ref.first_id))
        expected = max(expected, ref.end_id)
    if end is not None and end > expected:
        out.append((expected, end))
    return out


def subtract(ranges: Iterable[Range], covers: Iterable[Range]) -> list[Range]:
    """`ranges` minus the union of `covers`."""
    cuts = sorted(covers)
    out: list[Range] = []
    for a, b in ranges:
        for c, d in cuts:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


def missing_error(store: ObjectStore, missing: Sequence[Range]) -> MissingEvents:
    a, b = missing[0]
    where = store.url(JOURNALS)
    more = f" (and {len(missing) - 1} more ranges)" if len(missing) > 1 else ""
    return MissingEvents(
        f"provenance events {a}..{b - 1} are missing{more}: they were committed, but no "
        f"journal {JOURNALS}{a:0{WIDTH}d}-*.arrow or staged-ingest manifest "
        f"{JOURNALS}*-{a:0{WIDTH}d}.staged.json or block of a journal log {JOURNALS}log-*.flog "
        f"under {where} holds them any more (the object was deleted, or a damaged block header "
        "ends the log before them); nothing was skipped: restore it from a backup, or accept the "
        f"loss with `flowledger provenance accept-missing {a} {b}`",
        where,
        tuple(missing),
    )


def verify_complete(
    store: ObjectStore,
    allocator: IdAllocator,
    high_water: int,
    refs: Sequence[JournalRef],
    relist: Callable[[], tuple[int, Sequence[JournalRef]]],
    *,
    tail: bool,
) -> None:
    """Raise `MissingEvents` if ids at or above the high-water mark that some writer
    committed are held by no journal. `tail`: also the ids between the last journal and the
    allocator's next id (one GET of the allocator); otherwise only holes between journals
    are checked, at no cost unless there is one. `relist` re-reads the high-water mark and
    the journals: called, after the allocator, only when a hole is suspected, since a writer
    reports its object landed only after it did (and rollover commits before it deletes)."""
    state = None
    suspect = subtract(gaps(high_water, refs), allocator.in_flight())
    if tail:
        state = allocator.state()
        if state is None:
            return  # nothing allocated yet, or the record of open allocations is lost
        suspect = subtract(gaps(high_water, refs, state.next_id), _explained(allocator, state))
    if not suspect:
        return
    if state is None:
        state = allocator.state()
        if state is None or not subtract(suspect, _explained(allocator, state)):
            return  # an open allocation: a writer still writing, or one that failed
    high, fresh = relist()
    found = gaps(high, fresh, state.next_id if tail else None)
    missing = subtract(found, _explained(allocator, state))
    if missing:
        raise missing_error(store, missing)


def _explained(allocator: IdAllocator, state: AllocatorState) -> list[Range]:
    """Ranges a hole may honestly cover: this process's flushes in flight, the open
    allocations, and ids taken after the allocator was read (not judged here)."""
    return [
        *allocator.in_flight(),
        *((a.first, a.end) for a in state.open),
        (state.next_id, 1 << 63),
    ]


def relist(
    store: ObjectStore,
    table: ProvenanceTable,
    high: int,
    manifests: staging.Manifests | None = None,
) -> tuple[int, list[JournalRef]]:
    """The fresh high-water mark and the journals above it, for `verify_complete`.
    Journals are listed before the high-water mark is read: a rollover commits before it
    deletes, so a journal merged meanwhile is below the fresh mark, never lost."""
    listed = list_journals(store, high, manifests)
    fresh = table.committed(fresh=True).high_water
    if fresh < high:  # the high-water mark moved back (expired history)
        listed = list_journals(store, fresh, manifests)
    return fresh, [ref for ref, _ in listed if ref.first_id >= fresh]


def object_ranges(listed: Iterable[tuple[JournalRef, ObjectInfo]]) -> set[Range]:
    """The id ranges of the listed objects: a journal's, or the whole manifest's for a part."""
    out = set()
    for ref, _ in listed:
        span = staging.parse_manifest_key(ref.group) if ref.group else None
        out.add(span if span is not None else (ref.first_id, ref.end_id))
    return out
