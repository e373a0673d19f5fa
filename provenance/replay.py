"""Replay (NiFi's `FlowController.replayFlowFile`): re-emit the content an event saw as a new
FlowFile and record a REPLAY event linking the original FlowFile to the new one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from storage.content import ContentClaim, ContentRepository, ResourceClaim

from .errors import ReplayError
from .event import ProvenanceEvent, now_ms

if TYPE_CHECKING:
    from .repository import ProvenanceRepository


@dataclass(frozen=True)
class ReplayResult:
    original_event_id: int
    replay_event_id: int
    flowfile_uuid: str
    claim: ContentClaim
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "original_event_id": self.original_event_id,
            "replay_event_id": self.replay_event_id,
            "flowfile_uuid": self.flowfile_uuid,
            "content_claim": self.claim.to_dict(),
            "attributes": self.attributes,
        }

    def describe(self) -> str:
        return (
            f"replayed event {self.original_event_id} as FlowFile {self.flowfile_uuid} "
            f"({self.claim.length} bytes); REPLAY event {self.replay_event_id}"
        )


def input_claim(event: ProvenanceEvent) -> tuple[ContentClaim | None, dict[str, str]]:
    """The content to replay: the event's input (previous) content if set, else its output;
    with the attributes the FlowFile had alongside it."""
    for prefix, size, attrs in (
        ("previous_", event.previous_file_size, event.previous_attributes),
        ("", event.file_size, event.attributes),
    ):
        container = getattr(event, f"{prefix}content_claim_container")
        section = getattr(event, f"{prefix}content_claim_section")
        ident = getattr(event, f"{prefix}content_claim_identifier")
        offset = getattr(event, f"{prefix}content_claim_offset")
        checksum = getattr(event, f"{prefix}content_claim_checksum")
        if container and section and ident and offset is not None and size is not None:
            rc = ResourceClaim(container, section, ident)
            return ContentClaim(rc, int(offset), int(size), checksum or ""), dict(attrs)
    return None, {}


class ContentCheck(Protocol):
    """What `replay_failure` asks of the content repository (a caller checking many events
    may answer from a memo of claims already checked)."""

    def is_accessible(self, claim: ContentClaim) -> bool: ...


def replay_failure(event: ProvenanceEvent, content: ContentCheck) -> str | None:
    """NiFi's `getReplayFailureReason`, for our repository (there are no queues to check)."""
    if event.event_type == "JOIN":
        return "Cannot replay events that are created from multiple parents (JOIN)"
    claim, _ = input_claim(event)
    if claim is None:
        return (
            "Cannot replay data from Provenance Event because the event does not contain the "
            "required Content Claim"
        )
    if not claim.written:
        return (
            "Cannot replay data from Provenance Event because its Content Claim has no checksum "
            "(imported from NiFi?), so its bytes cannot be verified"
        )
    if not content.is_accessible(claim):
        return (
            f"Cannot replay data from Provenance Event: its content ({claim}) is no longer "
            "available in the Content Repository (it was removed or expired)"
        )
    return None


def replay(
    repo: ProvenanceRepository,
    event_id: int,
    content: ContentRepository | None = None,
    requested_by: str = "flowledger",
) -> ReplayResult:
    event = repo.get_event(event_id)
    owned = content is None
    content = content or ContentRepository.open(repo.root)
    try:
        why = replay_failure(event, content)
        if why is not None:
            raise ReplayError(f"event {event_id}: {why}")
        claim, attrs = input_claim(event)
        assert claim is not None
        new_uuid = str(uuid.uuid4())
        content.clone(claim)  # the new FlowFile is one more claimant of the same bytes
        content.commit()
        attrs.update(
            {
                "uuid": new_uuid,
                "flowfile.replay": "true",
                "flowfile.replay.timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
            }
        )
        rc = claim.resource_claim
        replay_event = ProvenanceEvent(
            event_type="REPLAY",
            flowfile_uuid=event.flowfile_uuid,
            component_id=event.component_id,
            component_type=event.component_type,
            file_size=claim.length,
            event_time=now_ms(),
            lineage_start_date=event.lineage_start_date,
            parent_uuids=(event.flowfile_uuid,),
            child_uuids=(new_uuid,),
            updated_attributes=attrs,
            details=f"Replay requested by {requested_by}",
            source_queue_identifier=event.source_queue_identifier,
            content_claim_container=rc.container,
            content_claim_section=rc.section,
            content_claim_identifier=rc.identifier,
            content_claim_offset=claim.offset,
            content_claim_checksum=claim.checksum,
        )
        ids = repo.register_event(replay_event, sync=True)
        return ReplayResult(event_id, ids[0], new_uuid, claim, attrs)
    finally:
        if owned:
            content.close()
