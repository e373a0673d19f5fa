"""The provenance repository end to end, mirroring NiFi's TestPersistentProvenanceRepository,
on the local filesystem and MinIO (and moto where it is cheap)."""

from __future__ import annotations

import logging
import multiprocessing
import threading
import uuid
from pathlib import Path

import pytest

from provenance import (
    InvalidEvent,
    LineageError,
    ProvenanceRepository,
    ProvenanceSettings,
    Query,
    ReadOnlyQuery,
    SearchTerm,
)
from provenance.schema import VIEW_COLUMNS
from storage import StoreSettings
from tests.support.backends import Backend
from tests.support.provenance_events import ev, settings


def test_max_event_id_restored_after_restart(backend: Backend, tmp_path: Path) -> None:
    s = settings(tmp_path)
    repo = ProvenanceRepository.open(backend.open(), s)
    for i in range(20):
        repo.register_event(ev(i))
    repo.close()  # flushes
    repo = ProvenanceRepository.open(backend.open(), s)  # recovery rolls the journals over
    assert repo.max_event_id() == 19
    assert repo.snapshot().journals == ()
    assert [e.event_id for e in repo.get_events(0, 100)] == list(range(20))
    repo.close()


def test_ids_continue_after_restart_without_gaps(tbackend: Backend, tmp_path: Path) -> None:
    s = settings(tmp_path)
    repo = ProvenanceRepository.open(tbackend.open(), s)
    assert repo.register_events([ev(i) for i in range(4)], sync=True) == [0, 1, 2, 3]
    repo.close()
    repo = ProvenanceRepository.open(tbackend.open(), s)
    assert repo.register_events([ev(i) for i in range(4, 8)], sync=True) == [4, 5, 6, 7]
    assert [e.event_id for e in repo.get_events(0, 100)] == list(range(8))
    repo.close()


def test_time_range_over_several_files(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path, row_group_events=64))
    for chunk in range(4):  # four merged files of 250 events
        repo.register_events([ev(i) for i in range(chunk * 250, chunk * 250 + 250)], sync=True)
        repo.rollover()
    assert len(repo.snapshot().files) == 4
    found = repo.query(Query(start_time=200, end_time=799, max_results=10_000))
    assert len(found) == 600
    assert {e.event_time for e in found} == set(range(200, 800))
    # Newest first, and max_results keeps the newest.
    top = repo.query(Query(start_time=200, end_time=799, max_results=5))
    assert [e.event_time for e in top] == [799, 798, 797, 796, 795]
    # The row-group statistics skip blocks outside the range.
    stats = repo.reader.last_stats
    assert stats.row_groups_read < 4 * 4
    repo.close()


def test_term_and_inverted_term_are_complementary(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    events = [ev(i, component_id=f"comp-{i % 3}") for i in range(30)]
    repo.register_events(events[:15], sync=True)
    repo.rollover()
    repo.register_events(events[15:], sync=True)  # half merged, half still in a journal
    q = Query((SearchTerm("component_id", "comp-1"),), max_results=1000)
    inv = Query((SearchTerm("component_id", "comp-1", inverted=True),), max_results=1000)
    hits = {e.event_id for e in repo.query(q)}
    misses = {e.event_id for e in repo.query(inv)}
    assert len(hits) == 10
    assert hits | misses == set(range(30)) and not hits & misses
    repo.close()


def test_wildcard_finds_a_33000_character_attribute(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(
        tbackend.open(), settings(tmp_path, indexed_attributes=("big",))
    )
    big = "A" * 16_000 + "needle" + "B" * 16_994
    assert len(big) == 33_000
    repo.register_events([ev(1, updated_attributes={"big": big}), ev(2)], sync=True)
    for _ in range(2):  # in the journal, then in the merged file through the index
        found = repo.query(Query((SearchTerm("attr.big", "*needle*"),)))
        assert [e.event_id for e in found] == [0]
        assert found[0].updated_attributes["big"] == big
        found = repo.query(Query((SearchTerm("attr.big", "A?A*"),)))
        assert [e.event_id for e in found] == [0]
        repo.rollover()
    repo.close()


def test_attribute_truncation_keeps_uuid(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path, max_attribute_length=50))
    uid = str(uuid.uuid4())
    attrs = {"75chars": "X" * 75, "uuid": uid}
    repo.register_events([ev(1, flowfile_uuid=uid, updated_attributes=attrs)], sync=True)
    repo.rollover()
    e = repo.get_event(0)
    assert e.updated_attributes["75chars"] == "X" * 50
    assert e.updated_attributes["uuid"] == uid
    repo.close()


def test_fork_lineage_of_child(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    child = "00000000-0000-0000-0000-000000000000"
    parents = [f"00000000-0000-0000-0000-00000000000{i}" for i in (1, 2, 3)]
    fork = ev(
        0, event_type="FORK", flowfile_uuid=parents[0], parent_uuids=parents, child_uuids=[child]
    )
    repo.register_events([fork], sync=True)
    lineage = repo.lineage(child)  # from the journal, before rollover
    assert (len(lineage.nodes), len(lineage.edges)) == (2, 1)
    repo.rollover()
    lineage = repo.lineage(child)
    assert (len(lineage.nodes), len(lineage.edges)) == (2, 1)
    assert lineage.edges[0].flowfile_uuid == child
    expanded = repo.expand_parents(0)
    assert {n.flowfile_uuid for n in expanded.nodes if n.kind == "EVENT"} == {parents[0]}
    repo.register_events([ev(9, event_type="DROP")], sync=True)
    with pytest.raises(LineageError, match="so its children cannot be expanded"):
        repo.expand_children(1)
    repo.close()


def test_expand_parents_keeps_every_named_parent_whatever_the_dates(
    tbackend: Backend, tmp_path: Path
) -> None:
    """A JOIN whose lineage start date is its own time (later than its parents' events), and a
    parent whose only event carries a later clock than the JOIN's: PARENTS still answers all."""
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    early, skewed, child = (f"00000000-0000-0000-0000-00000000000{i}" for i in (1, 2, 3))
    join = ev(
        1000, event_type="JOIN", flowfile_uuid=child, parent_uuids=[early, skewed],
        child_uuids=[child], lineage_start_date=1000, event_time=1000,
    )  # fmt: skip
    repo.register_events(
        [ev(10, flowfile_uuid=early), join, ev(2000, flowfile_uuid=skewed)], sync=True
    )
    join_id = next(e.event_id for e in repo.get_events(0, 10) if e.event_type == "JOIN")
    for _ in range(2):  # from the journal, then from the rolled-over file
        expanded = repo.expand_parents(join_id)
        events = {n.flowfile_uuid for n in expanded.nodes if n.event_type == "RECEIVE"}
        assert events == {early, skewed}
        repo.rollover()
    repo.close()


def test_invalid_event_rejects_whole_batch(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    with pytest.raises(InvalidEvent, match="transit_uri"):
        repo.register_events([ev(1), ev(2, event_type="SEND", transit_uri=None)], sync=True)
    repo.flush()
    assert repo.max_event_id() == -1
    assert repo.get_events(0, 10) == []
    repo.close()


def test_queryable_before_rollover_and_never_twice(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    repo.register_events([ev(i) for i in range(10)], sync=True)
    uid = ev(3).flowfile_uuid
    q = Query((SearchTerm("flowfile_uuid", uid),))
    assert [e.event_id for e in repo.query(q)] == [3]
    assert repo.sql("SELECT count(*) FROM provenance")[1] == [(10,)]
    repo.rollover()
    repo.register_events([ev(i) for i in range(10, 15)], sync=True)
    assert [e.event_id for e in repo.query(q)] == [3]
    _names, rows = repo.sql("SELECT count(*), count(DISTINCT event_id) FROM provenance")
    assert rows == [(15, 15)]
    repo.close()


def test_sql_view_columns_and_read_only(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    repo.register_events([ev(1, parent_uuids=["p"])], sync=True)
    _, rows = repo.sql("DESCRIBE provenance")
    assert [r[0] for r in rows] == list(VIEW_COLUMNS)
    types = {r[0]: r[1] for r in rows}
    assert types["event_time"] == "TIMESTAMP" and types["parent_uuids"] == "VARCHAR[]"
    assert types["updated_attributes"] == "MAP(VARCHAR, VARCHAR)"
    assert types["event_id"] == "BIGINT"
    _, rows = repo.sql(
        "SELECT updated_attributes['filename'], parent_uuids, event_time FROM provenance"
    )
    assert rows[0][0] == "file-1.txt" and rows[0][1] == ["p"]
    for bad in (
        "DELETE FROM provenance",
        "CREATE TABLE x AS SELECT 1",
        "COPY (SELECT 1) TO 'x.csv'",
        "SELECT 1; SELECT 2",
    ):
        with pytest.raises(ReadOnlyQuery):
            repo.sql(bad)
    repo.close()


def test_get_event_and_events(tbackend: Backend, tmp_path: Path) -> None:
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path, row_group_events=16))
    repo.register_events([ev(i) for i in range(100)], sync=True)
    repo.rollover()
    repo.register_events([ev(i) for i in range(100, 120)], sync=True)
    assert repo.get_event(57) == ev(57).with_id(57)
    assert repo.get_event(110).event_time == 110
    got = repo.get_events(95, 10)
    assert [e.event_id for e in got] == list(range(95, 105))
    assert repo.max_event_id() == 119
    repo.close()


def test_expiry_by_size_and_age(tbackend: Backend, tmp_path: Path) -> None:
    # One writer after the other: the second one's ids continue where the first one's end.
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    for chunk in range(4):
        repo.register_events([ev(i) for i in range(chunk * 10, chunk * 10 + 10)], sync=True)
        repo.rollover()
    files = repo.snapshot().files
    repo.close()
    total = sum(f.size for f in files)
    limited = ProvenanceRepository.open(
        tbackend.open(), settings(tmp_path, max_storage_size=total - 1), recover=False
    )
    plan = limited.expire()
    assert [f.first_id for f in plan.by_size] == [0]  # oldest first, down to 90%
    assert limited.get_events(0, 100)[0].event_id == 10
    assert limited.sql("SELECT min(event_id), count(*) FROM provenance")[1] == [(10, 30)]
    # The local copy of the expired file is gone from the cache too.
    cached = {p.name for p in (tmp_path / "cache").rglob("*.parquet") if "events" in p.parts}
    assert len(cached) == 3
    limited.register_events([ev(99)], sync=True)  # journal: never expired
    aged = limited.expire(now_ms=2**62)  # far future: every merged file is too old
    assert len(aged.by_age) == 3
    assert [e.event_id for e in limited.get_events(0, 100)] == [40]
    assert limited.max_event_id() == 40
    limited.close()


def test_a_sql_connection_outlives_one_expiry_by_another_connection(
    tbackend: Backend, tmp_path: Path
) -> None:
    """A connection opens its files when its query runs; pruning for a newer snapshot keeps
    the files of the one before, so a connection made just before an expiry still answers."""
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    for chunk in range(2):
        repo.register_events([ev(i) for i in range(chunk * 10, chunk * 10 + 10)], sync=True)
        repo.rollover()
    before = repo.sql_connection()  # on both files, not queried yet
    total = sum(f.size for f in repo.snapshot().files)
    limited = ProvenanceRepository.open(
        tbackend.open(), settings(tmp_path, max_storage_size=total - 1), recover=False
    )
    assert [f.first_id for f in limited.expire().by_size] == [0]
    after = repo.sql_connection()  # prunes for the newer snapshot
    assert after.execute("SELECT count(*) FROM provenance").fetchall() == [(10,)]
    assert before.execute("SELECT count(*) FROM provenance").fetchall() == [(20,)]
    before.close()
    after.close()

    def cached() -> int:
        return sum(1 for p in (tmp_path / "cache").rglob("*.parquet") if "events" in p.parts)

    assert cached() == 2  # the expired file's copy is spared for one snapshot
    repo.register_events([ev(99)], sync=True)
    repo.rollover()
    repo.sql_connection().close()  # the snapshot after: it goes
    assert cached() == 2  # the file kept and the new one
    limited.close()
    repo.close()


def _writer(backend: Backend, cache: str, n: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    repo = ProvenanceRepository.open(
        backend.open(), ProvenanceSettings(cache_dir=cache), recover=False
    )
    ids: list[int] = []
    for i in range(n):
        ids += repo.register_events([ev(i)], sync=True)
    repo.close()
    out.put(ids)


def test_ids_unique_and_increasing_across_processes(tbackend: Backend, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(tbackend, str(tmp_path / "c"), 15, q)) for _ in range(3)
    ]
    for p in procs:
        p.start()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    for ids in results:
        assert ids == sorted(ids)  # strictly increasing within each writer
    every = sorted(i for ids in results for i in ids)
    assert every == list(range(45))  # unique, and no gaps
    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path))
    assert repo.max_event_id() == 44
    repo.close()


@pytest.mark.unit
def test_backlog_slows_writers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from storage import open_store

    store = open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    repo = ProvenanceRepository.open(store, settings(tmp_path, max_journal_backlog=1))
    repo.register_events([ev(1)], sync=True)
    with caplog.at_level(logging.WARNING, logger="flowledger.provenance"):
        repo.register_events([ev(2)], sync=True)
    assert "rollover is falling behind" in caplog.text
    assert len(repo.snapshot().files) == 1  # the writer merged the backlog itself
    repo.close()


def test_concurrent_rollovers_never_duplicate(tbackend: Backend, tmp_path: Path) -> None:
    import threading

    from provenance import ProvenanceConflict

    s = settings(tmp_path)
    writer = ProvenanceRepository.open(tbackend.open(), s)
    writer.register_events([ev(i) for i in range(40)], sync=True)
    repos = [ProvenanceRepository.open(tbackend.open(), s, recover=False) for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def roll(r: ProvenanceRepository) -> None:
        barrier.wait()
        try:
            outcomes.append(f"merged {r.rollover().events}")
        except ProvenanceConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=roll, args=(r,)) for r in repos]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "merged 40" in outcomes  # exactly one merged them; the other lost or found none
    assert len(writer.snapshot().files) == 1
    _, rows = writer.sql("SELECT count(*), count(DISTINCT event_id) FROM provenance")
    assert rows == [(40, 40)]
    for r in (*repos, writer):
        r.close()


@pytest.mark.unit
def test_background_flush_and_rollover(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from storage import open_store

    store = open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    s = settings(tmp_path, journal_flush_interval_s=0.05, rollover_time_s=0.1)
    repo = ProvenanceRepository.open(store, s, background=True)
    repo.register_events([ev(i) for i in range(10)], sync=False)  # the flusher writes them
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not repo.snapshot().files:
        time.sleep(0.05)
    assert [f.rows for f in repo.snapshot().files] == [10]
    # As in a process with no Spark session (a spark-tier test earlier in this one has one).
    monkeypatch.setattr("pyspark.sql.SparkSession.getActiveSession", lambda: None)
    with pytest.raises(ValueError, match="spark"):
        repo.rollover(engine="spark")
    from provenance import EventNotFound

    with pytest.raises(EventNotFound):
        repo.get_event(10)
    repo.close()


@pytest.mark.unit
def test_a_closed_repository_leaves_no_threads_behind(tmp_path: Path) -> None:
    """The journal writer's PUT threads belong to the repository: closing it stops them (they
    used to be one pool for the whole process, started at import)."""
    from storage import open_store

    def journal_threads() -> list[str]:
        return [
            t.name
            for t in threading.enumerate()
            if t.name.startswith("flowledger-provenance-journal")
        ]

    before = journal_threads()
    repo = ProvenanceRepository.open(
        open_store(str(tmp_path / "repo"), StoreSettings(fsync=False)), settings(tmp_path)
    )
    for i in range(3):
        repo.register_event(ev(i), sync=True)  # each flush sends its PUT from the pool
    assert len(journal_threads()) > len(before)
    assert [e.event_id for e in repo.get_events(0, 10)] == [0, 1, 2]
    repo.close()
    assert journal_threads() == before
