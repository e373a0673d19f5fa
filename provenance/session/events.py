"""The events a session registers at commit, generated as NiFi's `StandardProcessSession`
does in `updateProvenanceRepo` (see docs/provenance.md, "Sessions").

1. A FORK per parent that `create(parent)` made children of (children removed in the same
   session are left out; a FORK with no child left is dropped, NiFi's "spurious fork").
2. The events the session reported (RECEIVE, FETCH, SEND, ROUTE, DROP, CLONE, JOIN), in the
   order they were reported. All but SEND get the FlowFile's attributes and content as they
   are at commit; SEND keeps what it had when `send` was called.
3. Per FlowFile: CONTENT_MODIFIED if it existed before the session and its content changed
   (unless a FETCH or CONTENT_MODIFIED already says so); CREATE if `create()` made it and no
   CREATE/RECEIVE/FETCH/FORK/JOIN names it; ATTRIBUTES_MODIFIED only if its attributes changed
   and no other event names it (every event carries the attributes anyway).
A FlowFile created and removed in the same session leaves no event at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..event import ProvenanceEvent, now_ms
from .flowfile import FlowFile

#: Event types that bring a FlowFile into being: a CREATE would be redundant.
CREATION = frozenset({"CREATE", "RECEIVE", "FETCH", "FORK", "JOIN"})


@dataclass
class Record:
    """A FlowFile in a session (NiFi's `StandardRepositoryRecord`)."""

    original: FlowFile | None  # None: made in this session
    current: FlowFile
    created: bool = False  # by `create()` without parents (CREATE candidate)
    removed: bool = False
    relationship: str | None = None

    @property
    def is_new(self) -> bool:
        return self.original is None

    @property
    def content_changed(self) -> bool:
        before = None if self.original is None else self.original.content_claim
        return before != self.current.content_claim

    def updated_attributes(self) -> dict[str, str]:
        before = {} if self.original is None else dict(self.original.attributes)
        return {k: v for k, v in self.current.attributes.items() if before.get(k) != v}

    @property
    def attributes_changed(self) -> bool:
        if self.original is None:
            return True
        return dict(self.original.attributes) != dict(self.current.attributes)


@dataclass
class Reported:
    """An event reported during the session, completed at commit (`frozen` = SEND: its
    attributes and content were captured when it was reported)."""

    event_type: str
    flowfile_uuid: str
    fields: dict[str, Any] = field(default_factory=dict)
    event_time: int = field(default_factory=now_ms)
    frozen: ProvenanceEvent | None = None


@dataclass
class Fork:
    parent: str
    children: list[str] = field(default_factory=list)
    event_time: int = field(default_factory=now_ms)


def describe(
    record: Record, event_type: str, component: tuple[str, str], event_time: int
) -> ProvenanceEvent:
    """An event of `event_type` about a FlowFile as the record holds it now (NiFi `enrich`)."""
    cur, orig = record.current, record.original
    kw: dict[str, Any] = {
        "event_type": event_type,
        "flowfile_uuid": cur.uuid,
        "component_id": component[0],
        "component_type": component[1],
        "file_size": cur.size,
        "event_time": event_time,
        "lineage_start_date": cur.lineage_start_date,
        "previous_attributes": {} if orig is None else dict(orig.attributes),
        "updated_attributes": record.updated_attributes(),
    }
    if cur.content_claim is not None:
        c = cur.content_claim
        rc = c.resource_claim
        kw.update(
            content_claim_container=rc.container,
            content_claim_section=rc.section,
            content_claim_identifier=rc.identifier,
            content_claim_offset=c.offset,
            content_claim_checksum=c.checksum,
        )
    if orig is not None and orig.content_claim is not None:
        p = orig.content_claim
        prc = p.resource_claim
        kw.update(
            previous_file_size=orig.size,
            previous_content_claim_container=prc.container,
            previous_content_claim_section=prc.section,
            previous_content_claim_identifier=prc.identifier,
            previous_content_claim_offset=p.offset,
            previous_content_claim_checksum=p.checksum,
        )
    return ProvenanceEvent(**kw)


def build_events(
    records: Mapping[str, Record],
    reported: Iterable[Reported],
    forks: Iterable[Fork],
    component: tuple[str, str],
) -> list[ProvenanceEvent]:
    gone = {u for u, r in records.items() if r.removed and r.is_new}  # never existed outside
    out: list[ProvenanceEvent] = []
    types: dict[str, set[str]] = {}

    def note(event: ProvenanceEvent) -> None:
        out.append(event)
        for u in (event.flowfile_uuid, *event.parent_uuids, *event.child_uuids):
            types.setdefault(u, set()).add(event.event_type)

    for fork in forks:
        children = [c for c in fork.children if c not in gone]
        if not children or fork.parent in gone:
            continue
        e = describe(records[fork.parent], "FORK", component, fork.event_time)
        note(replace(e, parent_uuids=(fork.parent,), child_uuids=tuple(children)))
    for rep in reported:
        if rep.flowfile_uuid in gone:
            continue
        if rep.frozen is not None:
            note(rep.frozen)
            continue
        e = describe(records[rep.flowfile_uuid], rep.event_type, component, rep.event_time)
        fields = dict(rep.fields)
        for name in ("parent_uuids", "child_uuids"):
            if name in fields:
                fields[name] = tuple(u for u in fields[name] if u not in gone)
        if rep.event_type in ("CLONE", "JOIN") and not fields.get("child_uuids"):
            continue  # every child was removed again: nothing came of it
        note(replace(e, **fields))
    commit_time = now_ms()
    for u, r in records.items():
        if r.removed:
            continue  # a removed FlowFile's story ends with its DROP
        seen = types.get(u, set())
        added = False
        if not r.is_new and r.content_changed and not seen & {"FETCH", "CONTENT_MODIFIED"}:
            note(describe(r, "CONTENT_MODIFIED", component, commit_time))
            added = True
        if r.created and not seen & CREATION:
            note(describe(r, "CREATE", component, commit_time))
            added = True
        if not added and u not in types and r.attributes_changed and not r.is_new:
            note(describe(r, "ATTRIBUTES_MODIFIED", component, commit_time))
    return out
