"""Process sessions: NiFi's event-generation rules at commit, one test per rule, and
rollback (explicit or by an exception in the with-block) leaving nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from provenance import ProvenanceEvent, ProvenanceSettings
from provenance.session import (
    FlowFile,
    FlowFileHandlingError,
    FlowRepository,
    ProcessSession,
    SessionUnknownOutcome,
)
from storage import LocalObjectStore, ObjectStore
from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings

pytestmark = pytest.mark.unit

CONTENT = ContentRepositorySettings(archive_cleanup_frequency=0, cleanup_on_start=False)


@pytest.fixture
def root(tmp_path: Path) -> ObjectStore:
    return LocalObjectStore(str(tmp_path / "repo"))


@pytest.fixture
def repo(root: ObjectStore, tmp_path: Path) -> Iterator[FlowRepository]:
    r = FlowRepository.open(
        root,
        content_settings=CONTENT,
        provenance_settings=ProvenanceSettings(cache_dir=str(tmp_path / "cache")),
    )
    yield r
    r.close()


def types(events: tuple[ProvenanceEvent, ...] | list[ProvenanceEvent]) -> list[str]:
    return [e.event_type for e in events]


def of(events: tuple[ProvenanceEvent, ...], uuid: str) -> list[str]:
    return [e.event_type for e in events if e.flowfile_uuid == uuid]


def durable_count(root: ObjectStore, claim: ContentClaim) -> int:
    """The claimant count as a fresh process sees it (only what the ledger made durable)."""
    fresh = ContentRepository.open(root, CONTENT)
    try:
        return fresh.get_claimant_count(claim)
    finally:
        fresh.close()


def landed(repo: FlowRepository, data: bytes = b"a,b\n1,2\n", **attrs: str) -> FlowFile:
    """A FlowFile committed by an earlier session (RECEIVE)."""
    with repo.session("GetFile") as s:
        ff = s.import_from(data, s.create(attributes=attrs))
        s.receive(ff, "file:///data/in.csv")
    return ff


def test_create_emits_create_with_attributes_captured_at_commit(repo: FlowRepository) -> None:
    s = repo.session("GenerateFlowFile", "Processor")
    ff = s.create()
    ff = s.put_attribute(ff, "color", "red")  # after create: still part of the CREATE event
    result = s.commit()
    assert types(result.events) == ["CREATE"]
    [event] = result.events
    assert event.flowfile_uuid == ff.uuid
    assert event.attributes["color"] == "red"
    assert event.component_id == "GenerateFlowFile"
    assert repo.provenance.get_event(result.event_ids[0]).event_type == "CREATE"


def test_children_of_one_parent_are_a_fork(repo: FlowRepository) -> None:
    parent = landed(repo, kind="raw")
    s = repo.session("SplitRecord")
    kids = [s.create(parent) for _ in range(3)]
    result = s.commit()
    assert types(result.events) == ["FORK"]
    [fork] = result.events
    assert fork.flowfile_uuid == parent.uuid
    assert fork.parent_uuids == (parent.uuid,)
    assert sorted(fork.child_uuids) == sorted(k.uuid for k in kids)
    assert all(k.attributes["kind"] == "raw" for k in kids)  # children inherit attributes
    assert all(k.lineage_start_date == parent.lineage_start_date for k in kids)


def test_child_of_several_parents_is_a_join(repo: FlowRepository) -> None:
    a = landed(repo, b"a", shared="yes", only="a")
    b = landed(repo, b"b", shared="yes", only="b")
    s = repo.session("MergeContent")
    child = s.create([a, b])
    child = s.write(child, s.read(a) + s.read(b))
    result = s.commit()
    assert types(result.events) == ["JOIN"]  # no CREATE: the JOIN created it
    [join] = result.events
    assert join.flowfile_uuid == child.uuid
    assert sorted(join.parent_uuids) == sorted([a.uuid, b.uuid])
    assert join.child_uuids == (child.uuid,)
    assert join.file_size == 2  # content captured at commit
    assert child.attributes["shared"] == "yes" and "only" not in child.attributes


def test_clone_emits_clone_and_shares_the_bytes(repo: FlowRepository, root: ObjectStore) -> None:
    original = landed(repo)
    assert original.content_claim is not None
    before = durable_count(root, original.content_claim)
    s = repo.session("DuplicateFlowFile")
    copy = s.clone(original)
    result = s.commit()
    assert types(result.events) == ["CLONE"]
    assert result.events[0].parent_uuids == (original.uuid,)
    assert result.events[0].child_uuids == (copy.uuid,)
    assert copy.content_claim == original.content_claim
    assert durable_count(root, original.content_claim) == before + 1


def test_changed_content_emits_content_modified(repo: FlowRepository, root: ObjectStore) -> None:
    ff = landed(repo, b"old")
    old = ff.content_claim
    assert old is not None
    s = repo.session("ReplaceText")
    ff = s.write(ff, b"new content")
    ff = s.put_attribute(ff, "mime.type", "text/plain")  # covered by CONTENT_MODIFIED
    result = s.commit()
    assert types(result.events) == ["CONTENT_MODIFIED"]
    [event] = result.events
    assert event.previous_content_claim_identifier == old.resource_claim.identifier
    assert event.previous_file_size == 3 and event.file_size == len(b"new content")
    assert event.updated_attributes == {"mime.type": "text/plain"}
    assert durable_count(root, old) == 0  # the old content lost its only claimant
    assert ff.content_claim is not None
    assert repo.content.read_bytes(ff.content_claim) == b"new content"


def test_attribute_change_alone_emits_attributes_modified(repo: FlowRepository) -> None:
    ff = landed(repo, owner="a")
    s = repo.session("UpdateAttribute")
    ff = s.put_attribute(ff, "owner", "b")
    ff = s.remove_attribute(ff, "filename")
    result = s.commit()
    assert types(result.events) == ["ATTRIBUTES_MODIFIED"]
    assert result.events[0].previous_attributes["owner"] == "a"
    assert result.events[0].updated_attributes == {"owner": "b"}


def test_no_attributes_modified_when_another_event_covers_it(repo: FlowRepository) -> None:
    ff = landed(repo, owner="a")
    s = repo.session("RouteOnAttribute")
    ff = s.put_attribute(ff, "owner", "b")
    s.transfer(ff, "matched")
    result = s.commit()
    assert types(result.events) == ["ROUTE"]
    assert result.events[0].relationship == "matched"
    assert result.events[0].attributes["owner"] == "b"
    assert result.flowfiles("matched") == (ff,)


def test_unchanged_flowfile_emits_nothing(repo: FlowRepository) -> None:
    ff = landed(repo)
    s = repo.session("LogAttribute")
    assert s.read(ff) == b"a,b\n1,2\n"
    ff = s.put_attribute(ff, "filename", ff.attributes["filename"])  # same value
    assert s.commit().events == ()


def test_receive_replaces_create_and_captures_attributes_at_commit(repo: FlowRepository) -> None:
    s = repo.session("GetFile")
    ff = s.import_from(b"x,y\n", s.create())
    s.receive(ff, "file:///in/flights.csv", details="landed")
    ff = s.put_attribute(ff, "rows", "1")  # after receive: the RECEIVE event still has it
    result = s.commit()
    assert types(result.events) == ["RECEIVE"]
    [event] = result.events
    assert event.transit_uri == "file:///in/flights.csv"
    assert event.attributes["rows"] == "1"
    assert event.file_size == 4 and event.content_claim_identifier is not None


def test_fetch_replaces_content_modified(repo: FlowRepository) -> None:
    ff = landed(repo, b"pointer")
    s = repo.session("FetchS3Object")
    ff = s.write(ff, b"fetched bytes")
    s.fetch(ff, "s3://bucket/key")
    result = s.commit()
    assert types(result.events) == ["FETCH"]
    assert result.events[0].previous_file_size == len(b"pointer")


def test_send_keeps_attributes_of_the_time_it_was_called(repo: FlowRepository) -> None:
    ff = landed(repo, stage="before")
    s = repo.session("PutS3Object")
    s.send(ff, "s3a://lake/out/part-0.parquet")
    ff = s.put_attribute(ff, "stage", "after")
    result = s.commit()
    assert types(result.events) == ["SEND"]  # the SEND covers the attribute change
    assert result.events[0].attributes["stage"] == "before"
    assert result.events[0].transit_uri == "s3a://lake/out/part-0.parquet"


def test_remove_emits_drop_and_releases_the_content(
    repo: FlowRepository, root: ObjectStore
) -> None:
    ff = landed(repo)
    assert ff.content_claim is not None
    s = repo.session("Terminate")
    s.remove(ff)
    result = s.commit()
    assert types(result.events) == ["DROP"]
    assert durable_count(root, ff.content_claim) == 0


def test_created_and_removed_in_one_session_leaves_no_event(
    repo: FlowRepository, root: ObjectStore
) -> None:
    parent = landed(repo)
    s = repo.session("SplitText")
    kept = s.create(parent)
    temp = s.write(s.create(parent), b"scratch")
    claim = temp.content_claim
    assert claim is not None
    s.remove(temp)
    result = s.commit()
    assert types(result.events) == ["FORK"]
    assert result.events[0].child_uuids == (kept.uuid,)  # NiFi drops the removed child
    assert durable_count(root, claim) == 0


def test_rollback_leaves_no_event_and_no_claimant(repo: FlowRepository, root: ObjectStore) -> None:
    original = landed(repo)
    assert original.content_claim is not None
    count = durable_count(root, original.content_claim)
    last = repo.provenance.max_event_id()
    s = repo.session()
    ff = s.write(s.create(), b"never committed")
    s.receive(ff, "file:///x")
    s.clone(original)
    s.remove(original)
    assert ff.content_claim is not None
    s.rollback()
    assert repo.provenance.max_event_id() == last
    assert durable_count(root, original.content_claim) == count
    assert durable_count(root, ff.content_claim) == 0
    assert not repo.content.is_accessible(ff.content_claim)  # its bytes were never kept


def test_exception_in_with_block_rolls_back(repo: FlowRepository, root: ObjectStore) -> None:
    last = repo.provenance.max_event_id()
    claim = None
    with pytest.raises(RuntimeError, match="boom"), repo.session() as s:
        ff = s.write(s.create(), b"half done")
        claim = ff.content_claim
        s.transfer(ff, "success")
        raise RuntimeError("boom")
    assert claim is not None
    assert repo.provenance.max_event_id() == last
    assert durable_count(root, claim) == 0
    assert not repo.content.is_accessible(claim)


def test_content_is_durable_before_provenance(
    repo: FlowRepository, root: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed journal write happens after content and counts are durable (never the
    reverse: no event may name content that is not durable)."""
    s = repo.session()
    ff = s.write(s.create(), b"payload")

    def fail(*_: object, **__: object) -> list[int]:
        assert ff.content_claim is not None
        assert durable_count(root, ff.content_claim) == 1  # already durable when events go
        raise OSError("journal PUT timed out")

    monkeypatch.setattr(repo.provenance, "register_events", fail)
    with pytest.raises(SessionUnknownOutcome, match="content is durable"):
        s.commit()


def test_stale_or_removed_flowfile_is_refused(repo: FlowRepository) -> None:
    s: ProcessSession = repo.session()
    v1 = s.create()
    s.put_attribute(v1, "a", "1")
    with pytest.raises(FlowFileHandlingError, match="most recent version"):
        s.put_attribute(v1, "b", "2")
    other = s.create()
    s.remove(other)
    with pytest.raises(FlowFileHandlingError, match="removed"):
        s.transfer(other, "success")
    s.rollback()
