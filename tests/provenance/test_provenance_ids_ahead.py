"""Ids taken ahead: the next flush's ids are allocated while the last flush lands, so a lone
durable writer's flush makes no allocator request; a range taken ahead is an ordinary open
allocation (a hole it leaves is honest), reused or given back when no writer followed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from provenance import MissingEvents, ProvenanceRepository
from provenance.ids import IdAllocator
from storage import ObjectStore, open_store
from tests.support.provenance_events import ev, settings


def _store(tmp_path: Path) -> ObjectStore:
    return open_store("file://" + str(tmp_path / "repo"))


def _allocator(store: ObjectStore) -> IdAllocator:
    ids = IdAllocator(store, lambda: 0)
    ids.repair(0)
    return ids


def _state(ids: IdAllocator) -> tuple[int, list[tuple[int, int]], str]:
    state = ids.state()
    assert state is not None
    return state.next_id, [(a.first, a.end) for a in state.open], state.etag


@pytest.mark.unit
def test_a_range_taken_ahead_is_open_and_then_used_without_a_request(tmp_path: Path) -> None:
    ids = _allocator(_store(tmp_path))
    assert ids.allocate(4) == 0
    ids.take_ahead(5)
    next_id, open_, etag = _state(ids)
    assert next_id == 9
    assert (4, 9) in open_  # recorded before use: a hole it leaves is an honest one
    assert ids.ahead_for(5)
    assert ids.allocate(5) == 4
    assert _state(ids)[2] == etag  # the allocator document was not written again


@pytest.mark.unit
def test_a_mismatched_or_stale_range_is_reused_from_its_first_id(tmp_path: Path) -> None:
    ids = _allocator(_store(tmp_path))
    ids.allocate(2)
    ids.take_ahead(5)
    assert ids.allocate(3) == 2  # another size: reused through one CAS, no hole
    next_id, open_, _ = _state(ids)
    assert next_id == 5
    assert (2, 7) not in open_
    ids.ahead_max_age_s = 0.001
    ids.take_ahead(0)  # nothing to take
    ids.ahead_max_age_s = 1e-9
    ids.take_ahead(4)
    assert not ids.ahead_for(4)  # too old to use without asking the allocator
    assert ids.allocate(4) == 5
    assert _state(ids)[0] == 9


@pytest.mark.unit
def test_a_range_another_writer_followed_stays_an_honest_hole(tmp_path: Path) -> None:
    store = _store(tmp_path)
    a, b = _allocator(store), _allocator(store)
    a.allocate(1)
    a.take_ahead(5)  # [1, 6)
    assert b.allocate(2) == 6
    assert a.allocate(3) == 8  # another size, and b followed the range: not reusable
    next_id, open_, _ = _state(a)
    assert next_id == 11
    assert (1, 6) in open_  # nothing will fill it: an honest hole rollover skips
    a.take_ahead(5)  # a met another writer: it takes no more ids ahead
    assert not a.ahead_for(5)
    assert _state(a)[0] == 11
    b.take_ahead(4)  # [11, 15), taken as b learns of a
    assert b.ahead_for(4)
    assert a.allocate(1) == 15
    b.release_ahead()  # a allocated after it: left open
    next_id, open_, _ = _state(b)
    assert next_id == 16
    assert (11, 15) in open_


@pytest.mark.unit
def test_a_lone_durable_writer_leaves_no_hole_across_close_and_reopen(tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(
        _store(tmp_path), settings(tmp_path, journal_ids_ahead=True), background=False
    )
    got = [repo.register_events([ev(b * 5 + i) for i in range(5)], sync=True) for b in range(3)]
    assert [i for batch in got for i in batch] == list(range(15))
    repo.close()  # the range taken ahead for a fourth flush is given back
    state = repo.ids.state()
    assert state is not None
    assert (state.next_id, state.open) == (15, ())
    again = ProvenanceRepository.open(
        _store(tmp_path), settings(tmp_path, journal_ids_ahead=True), background=False
    )
    assert again.register_events([ev(100)], sync=True) == [15]
    again.rollover()
    assert again.snapshot().journals == ()
    assert again.snapshot().high_water == 16
    again.close()


@pytest.mark.unit
def test_a_landed_flush_leaves_the_open_allocations_when_the_next_ids_are_taken(
    tmp_path: Path,
) -> None:
    repo = ProvenanceRepository.open(
        _store(tmp_path), settings(tmp_path, journal_ids_ahead=True), background=False
    )
    repo.register_events([ev(i) for i in range(5)], sync=True)
    repo.journals.flush()  # waits for nothing; the take-ahead runs on the writer's I/O thread
    repo.register_events([ev(i) for i in range(5, 10)], sync=True)
    repo.journals.close()  # joins the I/O thread: the second take-ahead has run
    state = repo.ids.state()
    assert state is not None
    # Only the range taken for a third flush is open: both landed flushes were removed by
    # the CAS that took the ids after them.
    assert [(a.first, a.end) for a in state.open] == [(10, 15)]
    repo.close()


@pytest.mark.unit
def test_a_deleted_journal_of_ids_taken_ahead_is_reported_while_its_writer_runs(
    tmp_path: Path,
) -> None:
    writer = ProvenanceRepository.open(
        _store(tmp_path),
        settings(tmp_path, journal_log_bytes=0, journal_ids_ahead=True),
        background=False,
    )
    for b in range(3):  # the second and third flushes use ids taken ahead
        writer.register_events([ev(b * 5 + i) for i in range(5)], sync=True)
    writer.journals.flush()
    store = _store(tmp_path).scoped("provenance/")
    journals = sorted(i.key for i in store.list("journals/"))
    assert len(journals) == 3
    store.delete_many([journals[1]])  # ids 5..9, taken ahead, landed and acknowledged
    reader = ProvenanceRepository.open(
        _store(tmp_path),
        settings(tmp_path, journal_ids_ahead=True),
        recover=False,
        background=False,
    )
    with pytest.raises(MissingEvents, match=r"events 5\.\.9 are missing"):
        reader.get_event(0)
    reader.close()
    writer.close()
