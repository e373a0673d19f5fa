"""Cheap lookups, which the service's event route and lookups among 10M events rely on: a
reused snapshot costs no request, yet a reader sees another writer's events and survives its
rollover; lookups from memory agree with lookups that read; the index's binary search agrees
with a full comparison."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from provenance import MissingEvents, ProvenanceRepository, Query, SearchTerm
from provenance.index import TermBounds, candidate_row_groups, matching_row_groups
from provenance.schema import SCHEMA
from storage import open_store
from tests.support.backends import Backend
from tests.support.provenance_events import ev, settings


def _requests(repo: ProvenanceRepository) -> int:
    return sum(repo.store.stats.snapshot().values())


def test_reused_snapshot_costs_no_request(tbackend: Backend, tmp_path: Path) -> None:
    writer = ProvenanceRepository.open(tbackend.open(), settings(tmp_path / "w"))
    writer.register_events([ev(i) for i in range(50)], sync=True)
    writer.rollover()
    reader = ProvenanceRepository.open(tbackend.open(), settings(tmp_path / "r"), recover=False)
    assert reader.get_event(3).flowfile_uuid == ev(3).flowfile_uuid
    reader.store.stats.reset()
    for i in (4, 17, 49):
        assert reader.get_event(i).file_size == ev(i).file_size
    assert _requests(reader) == 0  # same snapshot, footer and decoded row group
    cached = reader.cached_event(17)
    assert cached is not None and cached == reader.get_event(17)
    reader.close()
    writer.close()


def test_reader_sees_another_writer_and_survives_its_rollover(
    tbackend: Backend, tmp_path: Path
) -> None:
    writer = ProvenanceRepository.open(tbackend.open(), settings(tmp_path / "w"), background=False)
    writer.register_events([ev(i) for i in range(10)], sync=True)
    writer.rollover()
    reader = ProvenanceRepository.open(
        tbackend.open(), settings(tmp_path / "r", search_snapshot_reuse_s=60), recover=False
    )
    assert reader.max_event_id() == 9
    first = writer.register_events([ev(i) for i in range(10, 20)], sync=True)
    second = writer.register_events([ev(i) for i in range(20, 30)], sync=True)
    # Past the reused snapshot: the miss asks the store again, at once.
    assert reader.get_event(second[-1]).event_time == 29
    assert reader.cached_event(second[-1]) is None  # a journal: not answered from memory
    # The other process merges (and deletes) both journals while the reader still reuses
    # a snapshot naming them: a journal gone is read again from a fresh snapshot.
    writer.rollover()
    found = reader.query(Query((SearchTerm("flowfile_uuid", ev(15).flowfile_uuid),)))
    assert [e.event_id for e in found] == [first[5]]
    assert reader.get_event(first[0]).event_time == 10
    # A writer's own events are visible to its next read, without waiting for freshness.
    own = writer.register_events([ev(30)], sync=True)
    newest = writer.query(Query((SearchTerm("event_type", "RECEIVE"),), max_results=1))
    assert [e.event_id for e in newest] == own
    reader.close()
    writer.close()


@pytest.mark.unit
def test_a_reused_journal_listing_sees_every_journal_added_or_deleted(tmp_path: Path) -> None:
    """On the local backend a search reuses the last journal listing while the journal
    folder is unchanged (no LIST per lookup); another process's new journal, and a journal
    deleted behind the reader's back, change the folder and are seen at the next search."""
    writer = ProvenanceRepository.open(
        open_store(str(tmp_path / "repo")),
        settings(tmp_path / "w", journal_log_bytes=0),  # one object per flush
        background=False,
    )
    for i in range(0, 30, 10):
        writer.register_events([ev(j) for j in range(i, i + 10)], sync=True)
    reader = ProvenanceRepository.open(
        open_store(str(tmp_path / "repo")), settings(tmp_path / "r"), recover=False
    )

    def search(i: int) -> list[int]:
        found = reader.query(Query((SearchTerm("flowfile_uuid", ev(i).flowfile_uuid),)))
        return [e.event_id for e in found]

    assert search(12) == [12]
    reader.store.stats.reset()
    assert search(25) == [25]
    assert reader.store.stats.snapshot().get("LIST", 0) == 0  # the listing was reused
    later = writer.register_events([ev(30)], sync=True)
    assert search(30) == later  # another process's journal: listed again at once
    reader.store.stats.reset()
    assert search(5) == [5]
    assert reader.store.stats.snapshot().get("LIST", 0) == 0
    assert search(5) == [5]
    victim = next(k for k in (tmp_path / "repo/provenance/journals").iterdir() if "10-" in k.name)
    victim.unlink()  # a committed journal lost behind everyone's back: reported, not skipped
    with pytest.raises(MissingEvents):
        search(25)
    reader.close()
    writer.close()


@pytest.mark.unit
def test_a_reused_journal_listing_sees_blocks_appended_to_a_log(tmp_path: Path) -> None:
    """A log keeps its name while it grows: the reused listing still reads it on, and the
    blocks already read are not read again."""
    writer = ProvenanceRepository.open(
        open_store(str(tmp_path / "repo")), settings(tmp_path / "w"), background=False
    )
    writer.register_events([ev(j) for j in range(10)], sync=True)
    reader = ProvenanceRepository.open(
        open_store(str(tmp_path / "repo")), settings(tmp_path / "r"), recover=False
    )

    def search(i: int) -> list[int]:
        found = reader.query(Query((SearchTerm("flowfile_uuid", ev(i).flowfile_uuid),)))
        return [e.event_id for e in found]

    assert search(3) == [3]
    for i in range(10, 40, 10):
        later = writer.register_events([ev(j) for j in range(i, i + 10)], sync=True)
        reader.store.stats.reset()
        assert search(i + 9) == [later[-1]]
        assert reader.store.stats.snapshot().get("LIST", 0) == 0  # same names: reused
    assert {j.log for j in reader.snapshot().journals} == {
        j.log for j in writer.snapshot().journals
    }
    assert len(reader.snapshot().journals) == 4
    reader.close()
    writer.close()


@pytest.mark.unit
def test_index_binary_search_agrees_with_comparison() -> None:
    terms = sorted(
        [(f"flowfile_uuid=ff-{v:03d}", rg) for v in range(0, 300, 3) for rg in (v % 7, 5)]
        + [("component_id=a", 1), ("component_id=b", 2), ("component_id=b", 9)]
    )
    table = pa.table(
        {"term": [t for t, _ in terms], "rg": pa.array([r for _, r in terms], pa.int32())}
    )
    for probe in ("component_id=b", "flowfile_uuid=ff-000", "flowfile_uuid=ff-297", "x", "a"):
        expected = {rg for t, rg in terms if t == probe}
        assert matching_row_groups(table, probe, probe, None) == expected


@pytest.mark.unit
def test_index_row_groups_found_by_bisect_agree_with_a_scan() -> None:
    """The index row groups a term range needs, by a binary search over their bounds, are
    those a scan of every row group's bounds finds (and a scan where statistics lack)."""
    bounds = [(f"t{i:03d}", f"t{i + 2:03d}") for i in range(0, 120, 3)]  # sorted, disjoint
    bounds[7] = ("t021", "t021")  # a row group of one term
    ordered = TermBounds(tuple(bounds), True)
    for lo, hi in (("t000", "t000"), ("t021", "t021"), ("t050", "t061"), ("s", "t"), ("u", "v")):
        scan = [i for i, (a, b) in enumerate(bounds) if not (b < lo or a > hi)]
        assert candidate_row_groups(ordered, lo, hi) == scan
    holes = TermBounds((bounds[0], None, bounds[2]), False)
    assert candidate_row_groups(holes, "t007", "t007") == [1, 2]  # unknown: read it


def test_lookups_read_files_written_with_either_encoding(
    tbackend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files rolled over before the dictionary change (a dictionary on every column) and
    after it answer the same lookups side by side."""
    from provenance import parquet_io

    repo = ProvenanceRepository.open(tbackend.open(), settings(tmp_path / "w"), background=False)
    everything = tuple(SCHEMA.names)
    monkeypatch.setattr(parquet_io, "DICTIONARY_COLUMNS", everything)
    repo.register_events([ev(i) for i in range(40)], sync=True)
    repo.rollover()
    monkeypatch.undo()
    repo.register_events([ev(i) for i in range(40, 80)], sync=True)
    repo.rollover()
    files = repo.snapshot(0).files
    assert len(files) == 2
    uuid_col = SCHEMA.get_field_index("flowfile_uuid")
    encodings = [
        repo.source.open(f.events_key, f.events_size)[0].metadata.row_group(0).column(uuid_col)
        for f in files
    ]
    assert ["RLE_DICTIONARY" in c.encodings for c in encodings] == [True, False]
    reader = ProvenanceRepository.open(tbackend.open(), settings(tmp_path / "r"), recover=False)
    for i in (3, 39, 40, 77):
        found = reader.query(Query((SearchTerm("flowfile_uuid", ev(i).flowfile_uuid),)))
        assert [e.file_size for e in found] == [ev(i).file_size]
        assert reader.get_event(i).flowfile_uuid == ev(i).flowfile_uuid
    reader.close()
    repo.close()
