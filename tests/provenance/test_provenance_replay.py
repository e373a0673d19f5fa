"""Replay on the content repository, with NiFi's semantics and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from provenance import ProvenanceRepository, ProvenanceSettings, ReplayError
from provenance.replay import replay
from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings
from tests.support.backends import Backend
from tests.support.provenance_events import ev

CONTENT_SETTINGS = ContentRepositorySettings(
    archive_cleanup_frequency=0, cleanup_on_start=False, archive_max_retention=0.0
)


def claim_fields(claim: ContentClaim, prefix: str = "") -> dict[str, object]:
    rc = claim.resource_claim
    return {
        f"{prefix}content_claim_container": rc.container,
        f"{prefix}content_claim_section": rc.section,
        f"{prefix}content_claim_identifier": rc.identifier,
        f"{prefix}content_claim_offset": claim.offset,
        f"{prefix}content_claim_checksum": claim.checksum,
    }


def test_replay_uses_input_content_and_links_flowfiles(tbackend: Backend, tmp_path: Path) -> None:
    root = tbackend.open()
    content = ContentRepository.open(root, CONTENT_SETTINGS)
    with content.transaction() as session:
        before = session.write_bytes(b"input bytes")
        after = session.write_bytes(b"output bytes, longer")
    repo = ProvenanceRepository.open(root, ProvenanceSettings(cache_dir=str(tmp_path / "c")))
    original = ev(
        1,
        event_type="CONTENT_MODIFIED",
        file_size=after.length,
        previous_file_size=before.length,
        previous_attributes={"filename": "in.txt", "uuid": ev(1).flowfile_uuid},
        **claim_fields(before, "previous_"),
        **claim_fields(after),
    )
    [eid] = repo.register_events([original], sync=True)
    result = replay(repo, eid, content)
    assert content.read_bytes(result.claim) == b"input bytes"
    assert result.attributes["flowfile.replay"] == "true"
    assert "flowfile.replay.timestamp" in result.attributes
    assert result.attributes["uuid"] == result.flowfile_uuid != original.flowfile_uuid
    assert result.attributes["filename"] == "in.txt"
    rep = repo.get_event(result.replay_event_id)
    assert rep.event_type == "REPLAY"
    assert rep.parent_uuids == (original.flowfile_uuid,)
    assert rep.child_uuids == (result.flowfile_uuid,)
    # The new FlowFile shows up in the lineage of the original, through the REPLAY event.
    lineage = repo.lineage(result.flowfile_uuid)
    assert any(n.event_type == "REPLAY" for n in lineage.nodes)
    # Without an input content, the output content is replayed.
    only_output = ev(2, event_type="SEND", file_size=after.length, **claim_fields(after))
    [eid2] = repo.register_events([only_output], sync=True)
    assert content.read_bytes(replay(repo, eid2, content).claim) == b"output bytes, longer"
    repo.close()
    content.close()


def test_replay_of_join_is_refused(tbackend: Backend, tmp_path: Path) -> None:
    root = tbackend.open()
    content = ContentRepository.open(root, CONTENT_SETTINGS)
    with content.transaction() as session:
        claim = session.write_bytes(b"joined")
    repo = ProvenanceRepository.open(root, ProvenanceSettings(cache_dir=str(tmp_path / "c")))
    join = ev(
        1, event_type="JOIN", parent_uuids=["a", "b"], file_size=claim.length, **claim_fields(claim)
    )
    [eid] = repo.register_events([join], sync=True)
    with pytest.raises(ReplayError, match="multiple parents"):
        replay(repo, eid, content)
    repo.close()
    content.close()


def test_replay_after_content_expired_explains(tbackend: Backend, tmp_path: Path) -> None:
    root = tbackend.open()
    content = ContentRepository.open(root, CONTENT_SETTINGS)
    with content.transaction() as session:
        claim = session.write_bytes(b"soon gone")
    repo = ProvenanceRepository.open(root, ProvenanceSettings(cache_dir=str(tmp_path / "c")))
    [eid] = repo.register_events(
        [ev(1, event_type="SEND", file_size=claim.length, **claim_fields(claim))], sync=True
    )
    repo.rollover()
    # The FlowFile is dropped: no claimant left, archived, then destroyed by archive cleanup.
    content.decrement_claimant_count(claim)
    content.commit()
    content.run_archive_cleanup()
    assert not content.is_accessible(claim)
    with pytest.raises(ReplayError, match="no longer available in the Content Repository"):
        replay(repo, eid, content)
    # Lineage still works without the content.
    assert repo.lineage(ev(1).flowfile_uuid).nodes
    no_claim = ev(2)
    [eid2] = repo.register_events([no_claim], sync=True)
    with pytest.raises(ReplayError, match="does not contain the required Content Claim"):
        replay(repo, eid2, content)
    repo.close()
    content.close()
