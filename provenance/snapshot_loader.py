"""What a reader sees, loaded fresh: the committed files and the unmerged journals above the
high-water mark, with the journal LIST overlapping the timeline's freshness check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from .catalog import Snapshot
from .holes import gaps
from .journal_listing import JournalListing, Listed
from .journal_terms import JournalTerms
from .layout import JournalRef
from .table import ProvenanceTable

Verify = Callable[[int, Sequence[JournalRef]], None]


class SnapshotLoader:
    def __init__(
        self,
        table: ProvenanceTable,
        listing: JournalListing,
        terms: JournalTerms,
        verify: Verify,
    ) -> None:
        """`verify(high, refs)`: raise if a committed journal is missing between `refs`."""
        self._table, self._listing, self._terms, self._verify = table, listing, terms, verify
        self._io = ThreadPoolExecutor(1, thread_name_prefix="flowledger-provenance-list")
        #: (the listing, the high-water mark, the journals taken from it): see `_refs`.
        self._last: tuple[Listed, int, tuple[JournalRef, ...]] | None = None
        #: The high-water mark and journals last seen without a hole between them.
        self._whole: tuple[int, tuple[JournalRef, ...]] | None = None

    def close(self) -> None:
        self._io.shutdown(wait=False)

    def load(self, verify: bool = True) -> Snapshot:
        """Committed files and unmerged journals. The journal LIST starts from the last
        known high-water mark while the timeline's freshness check (a HEAD) runs, so a
        lookup waits for one round trip, not two (measured: 2 x 9 ms of a 62 ms warm lookup
        on MinIO); journals merged meanwhile are dropped by the fresh high-water mark."""
        known = self._table.known_high_water()
        listing = None if known is None else self._io.submit(self._listing.list, known)
        committed = self._table.committed()
        high = committed.high_water
        self._terms.forget_below(high)
        if listing is None or known is None or high < known:
            if listing is not None:  # the high-water mark moved back (expired history)
                listing.result()
            found = self._listing.list(high)
        else:
            found = listing.result()
        refs = self._refs(high, found)
        whole = self._whole
        if verify and (whole is None or whole[0] != high or whole[1] is not refs):
            if gaps(high, refs):
                self._verify(high, refs)
            else:  # no hole between the journals: nothing to verify until they change
                self._whole = (high, refs)
        return Snapshot(committed.files, refs, high)

    def _refs(self, high: int, found: Listed) -> tuple[JournalRef, ...]:
        """The journals of `found` at or above `high`; the same tuple as last time when the
        listing is the same (a reused listing comes back as the same list), so an unchanged
        snapshot costs no pass over its journals."""
        last = self._last
        if last is not None and last[0] is found and last[1] == high:
            return last[2]
        refs = tuple(ref for ref, _ in found if ref.first_id >= high)
        self._last = (found, high, refs)
        return refs
