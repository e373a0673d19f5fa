"""Durable by default with group commit, the columnar events->Arrow path, and journal
filters (a lookup loads only the journals that may hold its FlowFile)."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from provenance import InvalidEvent, ProvenanceRepository, ProvenanceSettings, Query, SearchTerm
from provenance.journal_terms import JournalTerms
from provenance.records import to_table, validate
from provenance.schema import events_to_table
from tests.support.backends import Backend
from tests.support.provenance_events import ev, settings


def _uuid_query(i: int) -> Query:
    return Query((SearchTerm("flowfile_uuid", f"00000000-0000-0000-0000-{i:012d}"),))


@pytest.mark.unit
def test_columnar_table_equals_record_by_record() -> None:
    events = [ev(i, parent_uuids=["p"], details=None if i % 2 else "d") for i in range(20)]
    events.append(ev(99, event_type="ROUTE", relationship="ok", transit_uri=None))
    fast = to_table(events, 65536)
    slow = events_to_table(validate(events), 65536)
    assert fast.equals(slow)


@pytest.mark.unit
def test_columnar_path_keeps_the_record_errors() -> None:
    bad = [ev(0), ev(1, event_type="SEND", transit_uri=None)]
    with pytest.raises(InvalidEvent, match=r"event #1 of the batch .*Transit URI"):
        to_table(bad, 65536)
    with pytest.raises(InvalidEvent, match=r"event #0 of the batch.*file_size"):
        to_table([ev(0, file_size=True)], 65536)
    with pytest.raises(InvalidEvent, match=r"event #1 of the batch.*file_size"):
        to_table([ev(0), ev(1, file_size="12")], 65536)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"file_size": 1.5}, "file_size"),
        ({"file_size": 2.0}, "file_size"),
        ({"file_size": 2**64}, "file_size"),
        ({"event_time": 1.0}, "event_time"),
        ({"details": b"bytes"}, "details"),
        ({"details": 7}, "details"),
        ({"updated_attributes": {"k": 1}}, "updated_attributes"),
        ({"updated_attributes": {"k": b"v"}}, "updated_attributes"),
        ({"previous_attributes": {1: "v"}}, "previous_attributes"),
        ({"source_fields": {"k": None}}, "source_fields"),
    ],
)
def test_columns_refuse_what_the_record_check_refuses(kw: dict[str, object], field: str) -> None:
    """Columns are built by Arrow's inference, which tells a float from an int and bytes from
    a string where an explicit Arrow type would convert them: the batch is refused, and the
    record check names the event and the field."""
    with pytest.raises(InvalidEvent, match=rf"event #1 of the batch.*{field}"):
        to_table([ev(0), ev(1, **kw), ev(2)], 65536)


@pytest.mark.unit
def test_columns_keep_nulls_types_and_times() -> None:
    """Null attribute values (a removed attribute), all-null columns and event times come
    through the inferred columns as the record path builds them."""
    events = [
        ev(i, previous_attributes={"gone": None}, updated_attributes={"a": str(i), "b": None})
        for i in range(3)
    ]
    fast = to_table(events, 65536)
    assert fast.equals(events_to_table(validate(events), 65536))
    assert fast.column("previous_attributes").to_pylist()[0] == [("gone", None)]
    assert fast.column("event_time").type == events_to_table(events, 65536).schema.field(1).type
    assert fast.column("details").null_count == 3


def test_register_events_is_durable_and_visible_by_default(
    tbackend: Backend, tmp_path: Path
) -> None:
    writer = ProvenanceRepository.open(tbackend.open(), settings(tmp_path), background=False)
    ids = writer.register_events([ev(i) for i in range(5)])  # no sync=, no flush()
    assert ids == [0, 1, 2, 3, 4]
    reader = ProvenanceRepository.open(
        tbackend.open(), ProvenanceSettings(cache_dir=str(tmp_path / "c2"))
    )
    found = reader.query(_uuid_query(3))
    assert [e.event_id for e in found] == [3]
    assert writer.register_events([ev(9)], sync=False) == []  # the documented fast path
    assert reader.query(_uuid_query(9)) == []
    writer.close()
    assert [e.event_id for e in reader.query(_uuid_query(9))] == [5]


@pytest.mark.unit
def test_concurrent_sync_writers_share_flushes(tmp_path: Path) -> None:
    from storage import StoreSettings, open_store

    s = settings(tmp_path, journal_count=1, journal_sync_wait_s=0.05)
    store = open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    repo = ProvenanceRepository.open(store, s, background=False)
    got: list[list[int]] = []
    lock = threading.Lock()

    def write(k: int) -> None:
        for j in range(10):
            ids = repo.register_events([ev(k * 100 + j * 10 + n) for n in range(3)])
            with lock:
                got.append(ids)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 40
    assert sorted(i for ids in got for i in ids) == list(range(120))
    assert all(ids == list(range(ids[0], ids[0] + 3)) for ids in got)
    journals = repo.snapshot().journals
    assert len(journals) <= 40 and sum(j.count for j in journals) == 120
    # every caller's events are durable: a fresh repository object finds each of them
    fresh = ProvenanceRepository.open(store, ProvenanceSettings(cache_dir=str(tmp_path / "c2")))
    assert len(fresh.get_events(0, 1000)) == 120
    repo.close()


def test_lookup_loads_only_journals_that_may_hold_the_flowfile(
    tbackend: Backend, tmp_path: Path
) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path), background=False)
    for k in range(30):
        repo.register_events([ev(k * 10 + n) for n in range(10)])
    assert len(repo.snapshot().journals) == 30
    loaded: list[str] = []
    real = repo._load_journal

    def counting(ref):  # type: ignore[no-untyped-def]
        loaded.append(ref.key)
        return real(ref)

    repo.reader._load_journal = counting
    repo._load_journal = counting  # type: ignore[method-assign]
    found = repo.query(_uuid_query(123))
    assert [e.event_id for e in found] == [123]
    assert len(loaded) == 1
    # another process (no filters yet; recover=False: opening would roll the journals over)
    # loads each journal once, then filters
    other = ProvenanceRepository.open(
        tbackend.open(), ProvenanceSettings(cache_dir=str(tmp_path / "c2")), recover=False
    )
    assert [e.event_id for e in other.query(_uuid_query(7))] == [7]
    assert len(other.journal_terms) == 30
    # a query without an exact indexed term still sees every journal
    every = repo.query(Query((SearchTerm("flowfile_uuid", "*-000000000123"),)))
    assert [e.event_id for e in every] == [123]
    repo.close()
    other.close()


@pytest.mark.unit
def test_journal_filters_are_not_visited_by_the_garbage_collector() -> None:
    """Filters of unmerged journals live until rollover: a full cyclic collection must not
    visit each of their hashes (it ran every few batches of a per-event ingest)."""
    table = to_table([ev(i, parent_uuids=[f"p{i}"]) for i in range(50)], 65536)
    terms = JournalTerms(("flowfile_uuid", "component_id", "attr.filename"))
    found = terms.filter_of(table)
    assert set(found) == {"flowfile_uuid", "component_id", "attr.filename"}
    assert not any(gc.is_tracked(hashes) for hashes in found.values())
    assert hash("p7") in found["flowfile_uuid"] and hash("file-7.txt") in found["attr.filename"]
    assert len(found["flowfile_uuid"]) == 100 and len(found["component_id"]) == 1


@pytest.mark.unit
def test_a_writer_rolls_over_by_size_on_its_own(tmp_path: Path) -> None:
    import time

    from storage import StoreSettings, open_store

    store = open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    # rollover_size of one byte: every flushed journal makes a rollover due
    repo = ProvenanceRepository.open(store, settings(tmp_path, rollover_size=1))  # background=None
    repo.register_events([ev(i) for i in range(10)])
    deadline = time.monotonic() + 60
    while repo.snapshot().journals and time.monotonic() < deadline:
        time.sleep(0.1)  # the maintenance thread wakes every journal_flush_interval_s
    snap = repo.snapshot()
    assert snap.journals == () and len(snap.files) == 1
    assert [e.event_id for e in repo.query(_uuid_query(4))] == [4]
    repo.close()


@pytest.mark.unit
def test_a_reader_starts_no_maintenance_thread(tmp_path: Path) -> None:
    from storage import StoreSettings, open_store

    store = open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    repo = ProvenanceRepository.open(store, settings(tmp_path))
    repo.query(_uuid_query(1))
    assert repo._thread is None
    repo.register_events([ev(1)])
    assert repo._thread is not None and repo._thread.is_alive()
    repo.close()
    assert not repo._thread.is_alive()
