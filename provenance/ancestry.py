"""A FlowFile's whole ancestry: NiFi's lineage graph with "expand parents" applied to every
FORK/JOIN/CLONE/REPLAY, so the lineage of a job's output reaches the inputs the job read."""

from __future__ import annotations

from .errors import FlowFileNotFound, LineageError
from .event import ProvenanceEvent
from .lineage import Lineage, compute_lineage
from .query import Query, SearchTerm
from .repository import ProvenanceRepository


def upstream_events(repo: ProvenanceRepository, flowfile: str) -> list[ProvenanceEvent]:
    """Events of `flowfile` and of every FlowFile it descends from, in (time, id) order."""
    limit = repo.settings.max_lineage_events
    seen: set[str] = set()
    frontier = [flowfile]
    events: dict[int, ProvenanceEvent] = {}
    while frontier:
        ff = frontier.pop()
        if ff in seen:
            continue
        seen.add(ff)
        # The term also matches events naming ff as a parent or child (NiFi's index does too).
        for e in repo.query(Query((SearchTerm("flowfile_uuid", ff),), max_results=limit + 1)):
            events[e.event_id] = e
            if e.flowfile_uuid == ff or ff in e.child_uuids:  # ff's history, not its children
                frontier += [p for p in (e.flowfile_uuid, *e.parent_uuids) if p not in seen]
        if len(events) > limit:
            raise LineageError(
                f"the ancestry of {flowfile} has more than max_lineage_events={limit} events"
            )
    return sorted(events.values(), key=lambda e: (e.event_time, e.event_id))


def upstream(repo: ProvenanceRepository, flowfile: str) -> Lineage:
    """The lineage graph of `flowfile` and all its ancestors."""
    events = upstream_events(repo, flowfile)
    if not events:
        raise FlowFileNotFound(f"no provenance events for FlowFile {flowfile}")
    ids = {e.flowfile_uuid for e in events} | {p for e in events for p in e.parent_uuids}
    return compute_lineage(events, ids | {flowfile}, repo.settings.max_lineage_events)


def input_files(repo: ProvenanceRepository, flowfile: str) -> list[str]:
    """Where a FlowFile came from: transit URIs of the RECEIVE/FETCH events of its ancestry."""
    return sorted(
        {
            e.transit_uri
            for e in upstream_events(repo, flowfile)
            if e.event_type in ("RECEIVE", "FETCH") and e.transit_uri
        }
    )
