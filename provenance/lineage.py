"""Lineage: NiFi's `StandardLineageResult.computeLineage`, and its JSON form."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import LineageError
from .event import ProvenanceEvent

LINKING = ("FORK", "JOIN", "CLONE", "REPLAY")


@dataclass(frozen=True)
class LineageNode:
    id: str  # "event:<id>" or "flowfile:<uuid>"
    kind: str  # "EVENT" or "FLOWFILE"
    flowfile_uuid: str
    timestamp: int
    event_id: int | None = None
    event_type: str | None = None
    parent_uuids: tuple[str, ...] = ()
    child_uuids: tuple[str, ...] = ()
    component_type: str | None = None


@dataclass(frozen=True)
class LineageEdge:
    flowfile_uuid: str
    source: str
    target: str


@dataclass(frozen=True)
class Lineage:
    flowfile_uuids: tuple[str, ...]
    nodes: tuple[LineageNode, ...]
    edges: tuple[LineageEdge, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "flowfile_uuids": list(self.flowfile_uuids),
            "nodes": [
                {
                    "id": n.id,
                    "type": n.kind,
                    "flowfile_uuid": n.flowfile_uuid,
                    "timestamp": n.timestamp,
                    **(
                        {
                            "event_id": n.event_id,
                            "event_type": n.event_type,
                            "parent_uuids": list(n.parent_uuids),
                            "child_uuids": list(n.child_uuids),
                        }
                        if n.kind == "EVENT"
                        else {}
                    ),
                }
                for n in self.nodes
            ],
            "edges": [
                {"flowfile_uuid": e.flowfile_uuid, "source": e.source, "target": e.target}
                for e in self.edges
            ],
        }


def _event_node(e: ProvenanceEvent) -> LineageNode:
    return LineageNode(
        f"event:{e.event_id}",
        "EVENT",
        e.flowfile_uuid,
        e.event_time,
        e.event_id,
        e.event_type,
        e.parent_uuids,
        e.child_uuids,
        e.component_type,
    )


def _flowfile_node(uuid: str, ts: int) -> LineageNode:
    return LineageNode(f"flowfile:{uuid}", "FLOWFILE", uuid, ts)


def compute_lineage(
    events: Iterable[ProvenanceEvent], flowfile_uuids: Iterable[str], max_events: int
) -> Lineage:
    """NiFi's algorithm: events in (time, id) order; an edge links each event to the previous
    node of its FlowFile; FORK/JOIN/CLONE/REPLAY create FlowFile nodes for the requested
    children and link parents; RECEIVE/CREATE start a FlowFile (two creators = error)."""
    wanted = set(flowfile_uuids)
    ordered = sorted(set(events), key=lambda e: (e.event_time, e.event_id))
    if len(ordered) > max_events:
        raise LineageError(
            f"lineage has {len(ordered)} events, more than max_lineage_events={max_events}"
        )
    nodes: dict[str, LineageNode] = {}
    edges: list[LineageEdge] = []
    last: dict[str, LineageNode] = {}
    for e in ordered:
        node = _event_node(e)
        nodes.setdefault(node.id, node)
        prev = last.get(e.flowfile_uuid)
        if prev is not None:
            # JOIN/CLONE/REPLAY name the edge after the previous node's FlowFile (NiFi).
            uuid = (
                prev.flowfile_uuid
                if e.event_type in ("JOIN", "CLONE", "REPLAY")
                else e.flowfile_uuid
            )
            edges.append(LineageEdge(uuid, prev.id, node.id))
        last[e.flowfile_uuid] = node
        if e.event_type in LINKING:
            for child in e.child_uuids:
                if child not in wanted:
                    continue
                ff = _flowfile_node(child, e.event_time)
                if ff.id in nodes:
                    raise LineageError(
                        "Unable to generate Lineage Graph because multiple events were registered "
                        f"claiming to have generated the same FlowFile (UUID = {child})"
                    )
                nodes[ff.id] = ff
                edges.append(LineageEdge(child, node.id, ff.id))
                last[child] = ff
            for parent in e.parent_uuids:
                prev_parent = last.get(parent)
                if prev_parent is not None and prev_parent.id != node.id:
                    edges.append(LineageEdge(parent, prev_parent.id, node.id))
                last[parent] = node
        elif e.event_type in ("RECEIVE", "CREATE"):
            ff = _flowfile_node(e.flowfile_uuid, e.event_time)
            if ff.id in nodes:
                raise LineageError(
                    "Found cycle in graph. This indicates that multiple events were registered "
                    f"claiming to have generated the same FlowFile (UUID = {e.flowfile_uuid})"
                )
            nodes[ff.id] = ff
            edges.append(LineageEdge(e.flowfile_uuid, node.id, ff.id))
            last[e.flowfile_uuid] = ff
    return Lineage(tuple(sorted(wanted)), tuple(nodes.values()), tuple(edges))


def check_uuids(uuids: Iterable[str], limit: int) -> list[str]:
    out = sorted(set(uuids))
    if len(out) > limit:
        raise LineageError(
            f"Cannot compute lineage for more than {limit} FlowFiles. "
            f"This lineage contains {len(out)}."
        )
    return out


def expandable(event: ProvenanceEvent, direction: str) -> None:
    """NiFi expands parents/children only for FORK/JOIN/CLONE/REPLAY events."""
    if event.event_type not in LINKING:
        raise LineageError(
            f"Event ID {event.event_id} indicates an event of type {event.event_type} "
            f"so its {direction} cannot be expanded"
        )
