"""Lineage requests (NiFi's lineage, expand parents, expand children) answered by searches.

Each request is one search per FlowFile UUID, all against one snapshot of the repository
(`query_many`), bounded by `max_lineage_uuids` and `max_lineage_events`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .errors import FlowFileNotFound
from .event import ProvenanceEvent
from .lineage import Lineage, check_uuids, compute_lineage, expandable
from .query import Query, SearchTerm
from .settings import ProvenanceSettings


class Searchable(Protocol):
    """What lineage needs of a repository."""

    settings: ProvenanceSettings

    def query_many(self, queries: Sequence[Query]) -> list[ProvenanceEvent]: ...

    def get_event(self, event_id: int) -> ProvenanceEvent: ...


def _events_for(
    repo: Searchable, uuids: Sequence[str], start: int | None, end: int | None
) -> list[ProvenanceEvent]:
    limit = repo.settings.max_lineage_events + 1
    term = "flowfile_uuid"
    return repo.query_many(
        [Query((SearchTerm(term, u),), start_time=start, end_time=end, max_results=limit)
         for u in uuids]
    )  # fmt: skip


def _events_named(
    repo: Searchable, uuids: Sequence[str], start: int | None, end: int | None
) -> list[ProvenanceEvent]:
    """The events of `uuids` in [start, end], and every event of a FlowFile that has none
    there: a FlowFile an event names is never lost to a time window (dates recorded by
    another writer's clock, or a lineage start date later than a parent's events)."""
    events = _events_for(repo, uuids, start, end)
    found = {e.flowfile_uuid for e in events}  # the term also matches events naming a uuid
    missing = [u for u in uuids if u not in found]
    if missing and (start is not None or end is not None):
        events += _events_for(repo, missing, None, None)
    return events


def lineage_of(repo: Searchable, flowfile_uuid: str) -> Lineage:
    uuids = check_uuids([flowfile_uuid], repo.settings.max_lineage_uuids)
    events = _events_for(repo, uuids, None, None)
    if not events:
        raise FlowFileNotFound(f"no provenance events for FlowFile {flowfile_uuid}")
    return compute_lineage(events, uuids, repo.settings.max_lineage_events)


def parents_of(repo: Searchable, event_id: int) -> Lineage:
    e = repo.get_event(event_id)
    expandable(e, "parents")
    uuids = check_uuids(e.parent_uuids, repo.settings.max_lineage_uuids)
    # NiFi searches from the event's lineage start date: no parent's event can precede it
    # when the dates are right, and one that does (a date recorded wrong) is still a parent's.
    events = _events_named(repo, uuids, None, e.event_time)
    return compute_lineage(events, uuids, repo.settings.max_lineage_events)


def children_of(repo: Searchable, event_id: int) -> Lineage:
    e = repo.get_event(event_id)
    expandable(e, "children")
    uuids = check_uuids(e.child_uuids, repo.settings.max_lineage_uuids)
    events = _events_named(repo, uuids, e.event_time, None)
    return compute_lineage(events, uuids, repo.settings.max_lineage_events)
