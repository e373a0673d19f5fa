"""The lineage of a FlowFile back to the raw inputs: NiFi's lineage of one FlowFile, expanded
through the parents of every FORK/JOIN/CLONE that made it (NiFi's "expand parents")."""

from __future__ import annotations

from dataclasses import dataclass, field

from provenance import ProvenanceEvent, ProvenanceRepository, Query, SearchTerm

LINKING = ("FORK", "JOIN", "CLONE", "REPLAY")


@dataclass(frozen=True)
class TraceNode:
    """A FlowFile, the events that made and changed it, and the FlowFiles it came from."""

    uuid: str
    filename: str
    events: tuple[ProvenanceEvent, ...]
    parents: tuple[TraceNode, ...] = field(default=())

    def sources(self) -> list[ProvenanceEvent]:
        """The RECEIVE/FETCH events at the roots: where the data entered."""
        own = [e for e in self.events if e.event_type in ("RECEIVE", "FETCH")]
        return own + [s for p in self.parents for s in p.sources()]


def trace(repo: ProvenanceRepository, uuid: str, depth: int = 16) -> TraceNode:
    found = repo.query(Query((SearchTerm("flowfile_uuid", uuid),), max_results=10_000))

    # Its own events, and the linking events that created it; not the FORKs it parented.
    def made_or_changed_it(e: ProvenanceEvent) -> bool:
        if uuid in e.child_uuids:
            return True
        return e.flowfile_uuid == uuid and not (e.event_type in LINKING and uuid in e.parent_uuids)

    mine = sorted(
        (e for e in found if made_or_changed_it(e)),
        key=lambda e: (e.event_time, e.event_id),
    )
    parents: list[str] = []
    for e in mine:
        if e.event_type in LINKING and uuid in e.child_uuids:
            parents += [p for p in e.parent_uuids if p not in parents and p != uuid]
    filename = next((e.attributes.get("filename", "") for e in reversed(mine)), "")
    nodes = tuple(trace(repo, p, depth - 1) for p in parents) if depth > 0 else ()
    return TraceNode(uuid, filename, tuple(mine), nodes)
