"""A small in-memory filter per unmerged journal, so a lookup never scans every journal.

For each journal the repository wrote or read, the hashes of the distinct values of every
indexed field (NiFi's indexed fields; the FlowFile UUID field includes parent and child
UUIDs, as in the merged files' term index). A search with an exact term on an indexed field
then loads only the journals whose filter may hold it; a journal not seen yet is loaded once
and filtered from then on. Hashes may collide (a journal is loaded for nothing, then
filtered row by row); they never miss. Memory: one small int per distinct value; journals
leave the filter when rollover merges them.

The hashes of a field are kept as the keys of a dict of ints (values None), not a frozenset:
such a dict is not tracked by Python's cyclic garbage collector, which otherwise visits every
hash of every unmerged journal on each full collection (with 1,000 journals of 1,000 events,
~100 ms per collection, several per second under a per-event ingest). Membership tests cost
the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .index import ATTRIBUTE_FIELDS, attribute_value_candidates, field_values
from .layout import JournalRef
from .query import Query

#: field -> hashes of its distinct values (dict keys: see the module docstring).
Filter = dict[str, dict[int, None]]


def _sources(table: pa.Table, name: str) -> list[pa.Array] | list[pa.ChunkedArray]:
    """Arrays holding every value of the field (attributes: a superset, see index.py)."""
    if name in ATTRIBUTE_FIELDS:
        return attribute_value_candidates(table, ATTRIBUTE_FIELDS[name])
    if name.startswith("attr."):
        return attribute_value_candidates(table, name[5:])
    return [col for col, _ in field_values(table, name)]


def journal_filter(table: pa.Table, fields: Iterable[str]) -> Filter:
    out: Filter = {}
    for name in fields:
        hashes: dict[int, None] = {}
        for col in _sources(table, name):
            hashes.update(dict.fromkeys(map(hash, pc.unique(col).drop_null().to_pylist())))
        out[name] = hashes
    return out


class JournalTerms:
    """The filters of the unmerged journals, by journal key.

    Kept in a plain dict (insertion ordered: past `max_journals` the oldest goes first)
    rather than a cache object: `select` reads one entry per unmerged journal on every
    lookup, and a plain dict's `get` is C code where a cache class's is Python (with 1,000
    journals, measured ~0.1 ms against ~0.8 ms per lookup)."""

    def __init__(self, fields: Sequence[str], max_journals: int = 65_536) -> None:
        self._fields = tuple(fields)
        self._max = max_journals
        #: journal key -> its filter; journal key -> its end id (for `forget_below`)
        self._filters: dict[str, Filter] = {}
        self._ends: dict[str, int] = {}
        self._high = 0
        self._lock = threading.Lock()

    def filter_of(self, table: pa.Table) -> Filter:
        return journal_filter(table, self._fields)

    def add(self, ref: JournalRef, table: pa.Table, found: Filter | None = None) -> None:
        """`found`: the table's filter, when computed already (`filter_of`)."""
        f = journal_filter(table, self._fields) if found is None else found
        with self._lock:
            self._ends[ref.key] = ref.end_id
            self._filters[ref.key] = f
            while len(self._filters) > self._max:  # the oldest filter and its end go
                oldest = next(iter(self._filters))
                del self._filters[oldest]
                self._ends.pop(oldest, None)

    def forget_below(self, high_water: int) -> None:
        """Drop the filters of journals merged (ids below `high_water`)."""
        with self._lock:
            if high_water <= self._high:
                return
            self._high = high_water
            for k in [k for k, end in self._ends.items() if end <= high_water]:
                del self._ends[k]
                self._filters.pop(k, None)

    def __len__(self) -> int:
        return len(self._filters)

    def select(
        self,
        journals: Sequence[JournalRef],
        q: Query,
        load: Callable[[JournalRef], pa.Table],
    ) -> list[JournalRef]:
        """The journals that may hold events matching `q` (all, when `q` has no exact term
        on an indexed field)."""
        probes = [
            (t.field, hash(t.value))
            for t in q.terms
            if not t.inverted and not t.is_wildcard and t.field in self._fields
        ]
        if not probes:
            return list(journals)
        get = self._filters.get
        with self._lock:  # one pass under the lock: a dict lookup per journal
            found = [get(j.key) for j in journals]
        for i, f in enumerate(found):
            if f is None:  # written by another process: loaded once, filtered from now on
                j = journals[i]
                self.add(j, load(j))
                with self._lock:
                    found[i] = self._filters.get(j.key)
        if len(probes) == 1:  # the common case (a FlowFile lookup), without a generator
            name, h = probes[0]
            return [j for j, f in zip(journals, found, strict=True) if f is None or h in f[name]]
        return [
            j
            for j, f in zip(journals, found, strict=True)
            if f is None or all(h in f[n] for n, h in probes)
        ]
