"""Provenance of commits on tables whose records change: one FlowFile per written file slice.

A keyed commit (upsert, insert, delete, insert_overwrite) writes new *file slices*; each one
is built from the slice it supersedes (same file group, the write stats' `prev_path`) and
from what the job read. Each written slice becomes, all at the instant's time:

    RECEIVE  per input file           (as provenance.job_events: the job's own FlowFile J
    JOIN / CONTENT_MODIFIED / CREATE   joins its inputs; left out when the caller names the
                                       job's parent FlowFiles itself and reads no file)
    JOIN     FlowFile S, parents = J (or the given parents) + the superseded slice's FlowFile
    SEND     FlowFile S, transit URI = the slice's file

Each event's lineage start date is, as NiFi computes it for a JOIN's child, the earliest of its
parents' (looked up in the repository; the superseded slice's commit time when it is not
there), so NiFi's "expand parents" window, from that date to the JOIN, holds every parent.

A slice's FlowFile UUID is `slice_uuid(file URI)` (uuid5 of the file's canonical URI), so a
later commit names the slice it replaced without a lookup, and the lineage of any row
version (its `_flowledger_commit_time` names the commit, the commit its slices) walks back
through every earlier slice of its file group to the files the first write read. Every event
carries `<table>#instant=<instant>` as `alternate_identifier_uri`: recording a commit twice
adds nothing.

The timeline knows nothing of provenance (it must not import it): `SliceProvenance` is a
`timeline.PostCommitHook` the flowledger layer installs on a table.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provenance import ProvenanceEvent, ProvenanceRepository, Query, SearchTerm
from provenance.job_events import Dataset, JobRun, file_attributes, job_events, job_flowfile
from timeline import Entry, Table, parse_time

from .uris import canonical, commit_marker

log = logging.getLogger("flowledger.provenance")
COMPONENT_TYPE = "flowledger.table"


def slice_uuid(file_uri: str) -> str:
    """The FlowFile UUID of one data file (one file slice): the same for every spelling of
    its URI (`s3a://` and `s3://`, relative and absolute local paths)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, canonical(file_uri)))


@dataclass(frozen=True)
class SliceWrite:
    """One file slice a commit wrote, and the slice of the same file group it supersedes."""

    uri: str
    size: int
    rows: int
    partition: str = ""
    file_group: str = ""
    prev_uri: str | None = None
    prev_commit: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)


def slices_of(table: Table, entry: Entry) -> list[SliceWrite]:
    """The slices `entry` added, with the write stats of keyed commits (files of other
    writes have no superseded slice)."""
    stats = {s["path"]: s for s in entry.metadata.get("write_stats", ()) if "path" in s}
    out = []
    for f in entry.added:
        st: Mapping[str, Any] = stats.get(f.path, {})
        prev = st.get("prev_path")
        out.append(
            SliceWrite(
                uri=table.store.url(f.path),
                size=f.size,
                rows=f.rows,
                partition=f.partition,
                file_group=f.file_group,
                prev_uri=table.store.url(prev) if prev else None,
                prev_commit=st.get("prev_commit"),
                counts={k: int(st[k]) for k in ("inserts", "updates", "deletes") if k in st},
            )
        )
    return out


@dataclass(frozen=True)
class CommitJob:
    """Who made a commit and from what: input files (RECEIVE each), and/or FlowFiles already
    in provenance that the written data derives from (`parents`)."""

    component_id: str = "flowledger"
    component_type: str = COMPONENT_TYPE
    inputs: tuple[str, ...] = ()
    parents: tuple[str, ...] = ()
    details: str = ""


def parent_uuids(slices: Sequence[SliceWrite], job: CommitJob) -> list[str]:
    """The FlowFiles already in provenance that the commit's slices name as parents: the
    job's given parents and each superseded slice."""
    prev = [slice_uuid(s.prev_uri) for s in slices if s.prev_uri]
    return sorted({*job.parents, *prev})


def lineage_starts(repo: ProvenanceRepository, uuids: Sequence[str]) -> dict[str, int]:
    """Each recorded FlowFile's lineage start date (its earliest event's, or event time when
    an event has none), from one search per FlowFile against one snapshot; FlowFiles with no
    event are left out."""
    wanted = set(uuids)
    if not wanted:
        return {}
    limit = repo.settings.max_lineage_events + 1
    found = repo.query_many(
        [Query((SearchTerm("flowfile_uuid", u),), max_results=limit) for u in sorted(wanted)]
    )
    out: dict[str, int] = {}
    for e in found:
        if e.flowfile_uuid in wanted:  # the term also matches events naming it as a parent
            start = e.event_time if e.lineage_start_date is None else e.lineage_start_date
            out[e.flowfile_uuid] = min(start, out.get(e.flowfile_uuid, start))
    return out


def commit_events(
    table_uri: str,
    entry: Entry,
    slices: Sequence[SliceWrite],
    job: CommitJob,
    starts: Mapping[str, int] | None = None,
) -> list[ProvenanceEvent]:
    """The events of one commit (see the module docstring). `starts`: the lineage start
    dates of the parents (`lineage_starts(repo, parent_uuids(slices, job))`); a parent not
    in it counts from its commit's time when it is a superseded slice."""
    starts = starts or {}
    marker = commit_marker(table_uri, entry.time)
    when = int(parse_time(entry.time).timestamp() * 1000)
    operation = str(entry.metadata.get("operation", entry.action))
    details = job.details or f"{operation} {table_uri}@{entry.time}"
    run = JobRun(
        key=marker,
        marker=marker,
        component_id=job.component_id,
        component_type=job.component_type,
        event_time=when,
        details=details,
        inputs=tuple(Dataset(u, identity=canonical(u)) for u in job.inputs),
        outputs=(),
        attributes={"flowledger.table": table_uri, "flowledger.instant": entry.time},
    )
    events: list[ProvenanceEvent] = []
    parents = list(job.parents)
    if job.inputs or not job.parents:
        events += job_events(run)
        parents.insert(0, job_flowfile(run))
    common: dict[str, Any] = {
        "component_id": job.component_id,
        "component_type": job.component_type,
        "event_time": when,
        "alternate_identifier_uri": marker,
    }
    job_start = min((starts[p] for p in parents if p in starts), default=when)
    for s in slices:
        ff = slice_uuid(s.uri)
        prev = [slice_uuid(s.prev_uri)] if s.prev_uri else []
        start = min(job_start, when)
        if prev:
            start = min(start, starts.get(prev[0], _commit_ms(s.prev_commit, when)))
        attrs = {
            **file_attributes(s.uri),
            "file.uri": s.uri,
            "table": table_uri,
            "instant.time": entry.time,
            "operation": operation,
            "partition": s.partition,
            "file_group": s.file_group,
            "record.count": str(s.rows),
            **{k: str(v) for k, v in s.counts.items()},
        }
        if s.prev_commit:
            attrs["prev_commit"] = s.prev_commit
        replaced = f", replacing the slice of {s.prev_commit}" if s.prev_commit else ""
        events.append(
            ProvenanceEvent(
                "JOIN", ff, file_size=s.size, parent_uuids=(*parents, *prev), child_uuids=(ff,),
                details=f"{details}: file group {s.file_group or s.uri}{replaced}",
                updated_attributes=attrs, lineage_start_date=start, **common,
            )
        )  # fmt: skip
        events.append(
            ProvenanceEvent(
                "SEND", ff, file_size=s.size, transit_uri=s.uri, details=f"{details}: wrote",
                updated_attributes=attrs, lineage_start_date=start, **common,
            )
        )  # fmt: skip
    return events


def _commit_ms(instant: str | None, default: int) -> int:
    """An instant time in epoch milliseconds (`default` when absent or not an instant)."""
    try:
        return int(parse_time(instant).timestamp() * 1000) if instant else default
    except ValueError:
        return default


def is_recorded(repo: ProvenanceRepository, table_uri: str, entry: Entry, first: str) -> bool:
    """Whether the commit's events are in `repo` already (one indexed lookup)."""
    marker = commit_marker(table_uri, entry.time)
    found = repo.query(Query((SearchTerm("flowfile_uuid", first),), max_results=100))
    return any(e.alternate_identifier_uri == marker for e in found)


def record_commit(
    repo: ProvenanceRepository, table: Table, entry: Entry, job: CommitJob = CommitJob()
) -> int:
    """Record `entry`'s slices durably (one journal object: all or none); returns how many
    events were new (0 when recorded before, or when the commit wrote no file)."""
    slices = slices_of(table, entry)
    if not slices:
        return 0
    if is_recorded(repo, table.uri, entry, slice_uuid(slices[0].uri)):
        return 0
    starts = lineage_starts(repo, parent_uuids(slices, job))
    events = commit_events(table.uri, entry, slices, job, starts)
    return len(repo.register_events(events, sync=True))


@dataclass
class SliceProvenance:
    """A post-commit hook recording every write's slices in `repo` (see the module
    docstring). `job` describes the writer; `job_of(entry)` may refine it per commit."""

    repo: ProvenanceRepository
    job: CommitJob = field(default_factory=CommitJob)
    job_of: Callable[[Entry], CommitJob] | None = None

    def __call__(self, table: Table, entry: Entry) -> None:
        if not entry.is_write:
            return
        # The commit is durable already: a failure here must not fail it.
        try:
            record_commit(self.repo, table, entry, self.job_of(entry) if self.job_of else self.job)
        except Exception:
            log.exception(
                "flowledger: commit %s of %s succeeded but its provenance was not recorded",
                entry.time,
                table.uri,
            )


__all__ = [
    "CommitJob",
    "SliceProvenance",
    "SliceWrite",
    "commit_events",
    "lineage_starts",
    "parent_uuids",
    "record_commit",
    "slice_uuid",
    "slices_of",
]
