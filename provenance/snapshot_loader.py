"""What a reader sees, loaded fresh: the committed files and the unmerged journals above the
high-water mark, with the journal LIST overlapping the timeline's freshness check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from .catalog import Snapshot
from .journal_listing import JournalListing
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
        self._io = ThreadPoolExecutor(1, thread_name_prefix="provenance-list")

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
            found = [(ref, info) for ref, info in listing.result() if ref.first_id >= high]
        refs = tuple(ref for ref, _ in found)
        if verify:
            self._verify(high, refs)
        return Snapshot(committed.files, refs, high)
