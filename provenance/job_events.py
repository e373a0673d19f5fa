"""A batch job as NiFi provenance: what it read, the job itself, what it wrote.

Shared by the Spark commit hook (flowledger.spark) and OpenLineage ingest. One run becomes,
in this order, all at the run's time with the job as component:

    RECEIVE  per input            FlowFile I_k, transit URI = the input
    JOIN     the job              FlowFile J, parents I_1..I_n, child J      (n >= 2)
    CONTENT_MODIFIED              FlowFile J = I_1                            (n == 1)
    CREATE                        FlowFile J                                  (n == 0)
    FORK     the job's output     FlowFile J, parent J, children O_1..O_m     (m >= 1)
    SEND     per output           FlowFile O_k, transit URI = the output

FlowFile UUIDs are uuid5 of (run key, role, dataset), so the same run always yields the same
events; every event carries the run's marker as `alternate_identifier_uri`, and a run whose job
FlowFile already has an event with that marker is recorded (one synchronous batch is one
journal object, so a run's events land all or none).
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .event import ProvenanceEvent
from .query import Query, SearchTerm
from .repository import ProvenanceRepository

#: Namespace of the FlowFile UUIDs of job runs (fixed: changing it breaks idempotency).
NAMESPACE = uuid.UUID("6f1c9b2e-5d1a-5c7e-9a43-0f5e2b8d7c11")


@dataclass(frozen=True)
class Dataset:
    """A file or dataset a run read or wrote."""

    uri: str  # the transit URI, as the engine named it
    size: int = 0  # bytes; 0 when the engine does not say
    attributes: Mapping[str, str] = field(default_factory=dict)
    #: What identifies it across spellings (s3a:// vs s3://); default: `uri`.
    identity: str = ""


@dataclass(frozen=True)
class JobRun:
    """One completed run of a job, ready to become provenance events."""

    key: str  # unique per run: the FlowFile UUIDs derive from it
    marker: str  # `alternate_identifier_uri` of every event of the run
    component_id: str
    component_type: str
    event_time: int  # epoch ms (UTC)
    details: str
    inputs: tuple[Dataset, ...]
    outputs: tuple[Dataset, ...]
    attributes: Mapping[str, str] = field(default_factory=dict)
    #: Set when the run failed: what it read is recorded, then a DROP with this reason; its
    #: outputs are not (a failed write is rolled back and leaves no SEND).
    failure: str | None = None
    #: What a reader calls the component (NiFi's `componentName`, kept in `source_fields`),
    #: e.g. an OpenLineage job's `namespace/name` where the component id is its run's UUID.
    component_name: str = ""


def flowfile_uuid(key: str, role: str, name: str = "") -> str:
    return str(uuid.uuid5(NAMESPACE, f"{key}\n{role}\n{name}"))


def _ident(d: Dataset) -> str:
    return d.identity or d.uri


def _inputs(run: JobRun) -> list[Dataset]:
    unique = {_ident(d): d for d in run.inputs}
    return [unique[k] for k in sorted(unique)]


def job_flowfile(run: JobRun) -> str:
    """The FlowFile of the job itself (the only input's, when there is one)."""
    inputs = _inputs(run)
    if len(inputs) == 1:
        return flowfile_uuid(run.key, "input", _ident(inputs[0]))
    return flowfile_uuid(run.key, "job")


def file_attributes(uri: str) -> dict[str, str]:
    head, name = posixpath.split(uri.rstrip("/"))
    return {"filename": name, "path": head + "/"}


def job_events(run: JobRun) -> list[ProvenanceEvent]:
    """The run's events, in the order above (see the module docstring)."""
    common: dict[str, Any] = {
        "component_id": run.component_id,
        "component_type": run.component_type,
        "event_time": run.event_time,
        "lineage_start_date": run.event_time,
        "alternate_identifier_uri": run.marker,
    }
    if run.component_name:
        common["source_fields"] = {"componentName": run.component_name}
    inputs = _inputs(run)
    in_ids = [flowfile_uuid(run.key, "input", _ident(d)) for d in inputs]
    out_ids = [flowfile_uuid(run.key, "output", _ident(d)) for d in run.outputs]
    events = [
        ProvenanceEvent(
            "RECEIVE", ff, file_size=d.size, transit_uri=d.uri,
            source_system_flowfile_identifier=d.uri, details=f"{run.details}: read",
            updated_attributes={**file_attributes(d.uri), **d.attributes}, **common,
        )
        for ff, d in zip(in_ids, inputs, strict=True)
    ]  # fmt: skip
    if run.failure is not None:
        return [*events, *_failed(run, in_ids, common)]
    size = sum(d.size for d in run.outputs)
    job_ff = job_flowfile(run)
    if len(in_ids) == 1:
        events.append(
            ProvenanceEvent(
                "CONTENT_MODIFIED", job_ff, file_size=size, previous_file_size=inputs[0].size,
                details=run.details, updated_attributes=dict(run.attributes), **common,
            )
        )  # fmt: skip
    else:
        events.append(
            ProvenanceEvent(
                "JOIN" if in_ids else "CREATE", job_ff, file_size=size,
                parent_uuids=tuple(in_ids), child_uuids=(job_ff,) if in_ids else (),
                details=run.details, updated_attributes=dict(run.attributes), **common,
            )
        )  # fmt: skip
    if out_ids:
        events.append(
            ProvenanceEvent(
                "FORK", job_ff, file_size=size, parent_uuids=(job_ff,),
                child_uuids=tuple(out_ids), details=run.details, **common,
            )
        )  # fmt: skip
    for ff, d in zip(out_ids, run.outputs, strict=True):
        events.append(
            ProvenanceEvent(
                "SEND", ff, file_size=d.size, transit_uri=d.uri,
                details=f"{run.details}: wrote",
                updated_attributes={**file_attributes(d.uri), **d.attributes}, **common,
            )
        )  # fmt: skip
    return events


def _failed(run: JobRun, in_ids: list[str], common: dict[str, Any]) -> list[ProvenanceEvent]:
    """A failed run: its inputs joined into the job's FlowFile (CREATE when it read nothing),
    which is dropped with the failure as its details."""
    job_ff = job_flowfile(run)
    attrs = {**run.attributes, "failure": run.failure or ""}
    events = []
    if len(in_ids) != 1:
        events.append(
            ProvenanceEvent(
                "JOIN" if in_ids else "CREATE", job_ff, file_size=0,
                parent_uuids=tuple(in_ids), child_uuids=(job_ff,) if in_ids else (),
                details=run.details, updated_attributes=dict(run.attributes), **common,
            )
        )  # fmt: skip
    events.append(
        ProvenanceEvent(
            "DROP", job_ff, file_size=0, details=f"{run.details} failed: {run.failure}",
            updated_attributes=attrs, **common,
        )
    )  # fmt: skip
    return events


def is_recorded(repo: ProvenanceRepository, run: JobRun) -> bool:
    """Whether the run's events are already in `repo` (one indexed lookup)."""
    found = repo.query(Query((SearchTerm("flowfile_uuid", job_flowfile(run)),), max_results=100))
    return any(e.alternate_identifier_uri == run.marker for e in found)


def record_runs(repo: ProvenanceRepository, runs: Iterable[JobRun]) -> int:
    """Register the events of every run not recorded yet, durably, as one batch (one journal
    object: all or none). Returns how many events were new."""
    return record_new_runs(repo, runs)[1]


def record_new_runs(repo: ProvenanceRepository, runs: Iterable[JobRun]) -> tuple[int, int]:
    """`record_runs`, returning (runs recorded now, events registered now)."""
    seen: set[str] = set()
    events: list[ProvenanceEvent] = []
    for run in runs:
        if run.key in seen or is_recorded(repo, run):
            continue
        seen.add(run.key)
        events += job_events(run)
    added = len(repo.register_events(events, sync=True)) if events else 0
    return len(seen), added
