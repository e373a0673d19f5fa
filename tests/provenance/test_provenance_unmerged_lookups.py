"""Lookups over unmerged journals without a pass over every journal or a copy of every
column: an unchanged snapshot is reused as is, matching rows are cut out as slices and put in
order without an Arrow sort, with the same answer as a filter and a sort."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from provenance import ProvenanceRepository, Query, SearchTerm
from provenance.journal_terms import JournalTerms
from provenance.layout import journal_key, parse_journal_key
from provenance.records import to_table
from provenance.search import SLICE_ROWS, matching_rows, newest_first
from storage import open_store
from tests.support.provenance_events import ev, settings

pytestmark = pytest.mark.unit


def _uuid_query(i: int) -> Query:
    return Query((SearchTerm("flowfile_uuid", ev(i).flowfile_uuid),), max_results=100)


def _table(times: list[int | None], first: int = 0) -> pa.Table:
    """Events with ids first.. and the given event times (None: a null time)."""
    t = to_table([ev(first + i) for i in range(len(times))], 65_536)
    ids = pa.array(range(first, first + len(times)), pa.int64())
    stamps = pa.array(times, pa.int64()).cast(pa.timestamp("ms"))
    t = t.set_column(0, "event_id", ids)
    return t.set_column(t.schema.get_field_index("event_time"), "event_time", stamps)


def test_an_unchanged_snapshot_is_the_same_one_and_a_new_journal_changes_it(
    tmp_path: Path,
) -> None:
    repo = ProvenanceRepository.open(
        open_store(str(tmp_path / "repo")), settings(tmp_path), background=False
    )
    for i in range(0, 40, 10):
        repo.register_events([ev(j) for j in range(i, i + 10)], sync=True)
    repo.snapshot(0)  # the first look after a change lists the journals again
    first = repo.snapshot(0)
    # Nothing changed since: the same journals, not a new tuple built by a pass over them.
    assert repo.snapshot(0).journals is first.journals
    assert len(first.journals) == 4
    added = repo.register_events([ev(40)], sync=True)
    after = repo.snapshot(0)
    assert after.journals is not first.journals and len(after.journals) == 5
    assert [e.event_id for e in repo.query(_uuid_query(40))] == added
    repo.close()


def test_lookups_over_unmerged_journals_find_every_match_newest_first(tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(
        open_store(str(tmp_path / "repo")), settings(tmp_path), background=False
    )
    # One FlowFile with events in several journals, adjacent and not, out of time order.
    times = [5, 3, 9, 9, 1, 7, 2]
    ids = []
    for n, t in enumerate(times):
        batch = [ev(100 + n * 10 + k) for k in range(3)] + [ev(1, event_time=t)]
        ids.append(repo.register_events(batch, sync=True)[-1])
    found = repo.query(_uuid_query(1))
    expected = sorted(zip(times, ids, strict=True), reverse=True)
    assert [(e.event_time, e.event_id) for e in found] == expected
    limited = repo.query(Query(_uuid_query(1).terms, max_results=3))
    assert [(e.event_time, e.event_id) for e in limited] == expected[:3]
    repo.close()


@pytest.mark.parametrize("matches", [0, 1, 5, SLICE_ROWS, SLICE_ROWS + 1, 300])
def test_slices_and_ordering_agree_with_filter_and_sort(matches: int) -> None:
    rnd = random.Random(matches)
    table = _table([rnd.randrange(20) for _ in range(400)])
    rows = set(rnd.sample(range(400), matches))
    if matches > 3:  # a run of adjacent rows too
        rows |= {10, 11, 12}
    mask = pa.array([i in rows for i in range(400)])
    parts = matching_rows(table, mask)
    assert sum(p.num_rows for p in parts) == len(rows)
    if len(rows) <= SLICE_ROWS:  # slices of the table, one per run of adjacent rows
        assert len(parts) <= len(rows)
    got = newest_first(pa.concat_tables(parts or [table.slice(0, 0)]), 50)
    want = (
        table.filter(mask)
        .sort_by([("event_time", "descending"), ("event_id", "descending")])
        .slice(0, 50)
    )
    assert got.to_pylist() == want.to_pylist()


def test_null_event_times_come_last() -> None:
    table = _table([2, None, 7, 1])
    got = newest_first(table, 10)
    assert got.column("event_id").to_pylist() == [2, 0, 3, 1]


def test_journal_filters_past_their_bound_drop_the_oldest_first() -> None:
    terms = JournalTerms(("flowfile_uuid",), max_journals=2)
    refs = []
    for n in range(3):
        key = journal_key(n * 10, n * 10 + 10)
        ref = parse_journal_key(key)
        assert ref is not None
        refs.append(ref)
        terms.add(ref, _table(list(range(10)), n * 10))
    assert len(terms) == 2
    loaded = []

    def load(ref: object) -> pa.Table:
        loaded.append(ref)
        return _table(list(range(10)))

    # The oldest journal's filter went: it is loaded again, the others are probed.
    assert terms.select(refs, _uuid_query(25), load) == [refs[2]]
    assert loaded == [refs[0]]
    terms.forget_below(20)
    assert len(terms) == 1
