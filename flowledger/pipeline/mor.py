"""`flights_enriched` as a merge-on-read table: the provenance of its delta commits' log files,
and the compaction the pipeline runs after the correction (docs/pipeline.md).

A delta commit adds no base file: its changes are log files attached to file groups
(`log_files` in its metadata). Each log file becomes one FlowFile (uuid5 of its URI, as a
slice's), joined from the writer's parents and the base file of its group's slice, and sent
to the log's URI, so a corrected row's `_flowledger_commit_time` (kept by compaction) still
leads to the raw inputs. The compaction's new base files are recorded as slices replacing
the old base (its write stats' `prev_path`), with the folded logs as parents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow.compute as pc

from provenance import ProvenanceRepository
from timeline import Entry, FileSlice, Instant, Table, data_instant_time, format_name

from ..slice_provenance import (
    CommitJob,
    SliceWrite,
    commit_events,
    is_recorded,
    lineage_starts,
    parent_uuids,
    slice_uuid,
    slices_of,
)
from . import tables as tbl
from .record import COMPONENT_TYPE


def log_writes(table: Table, entry: Entry) -> list[SliceWrite]:
    """The log files a delta commit appended, each with the base file of its group's slice."""
    slices = table.snapshot(entry.time).merge_on_read_slices() or []
    base = {sl.group: sl.base for sl in slices}
    out = []
    for lf in entry.metadata.get("log_files", ()):
        b = base.get(str(lf["file_group"]))
        counts = {"upserts": int(lf.get("upserts", 0)), "deletes": int(lf.get("deletes", 0))}
        out.append(
            SliceWrite(
                uri=_log_uri(
                    table,
                    str(lf["path"]),
                    lf.get("offset"),
                    int(lf["size"]) + int(lf.get("head", 0)),
                    lf.get("object_size"),
                ),
                size=int(lf["size"]),
                rows=int(lf["rows"]),
                partition=str(lf["partition"]),
                file_group=str(lf["file_group"]),
                prev_uri=table.store.url(b.path) if b is not None else None,
                prev_commit=data_instant_time(b.path) if b is not None else None,
                counts=counts,
            )
        )
    return out


def _log_uri(table: Table, path: str, offset: object, spans: object, object_size: object) -> str:
    """A log block's URI: its object's, with the block's offset as a fragment when the
    object holds the blocks of several file groups (one FlowFile per block). `spans` is the
    bytes the block needs: its own, and in an object written as one stream the stream's head
    before it."""
    uri = table.store.url(path)
    if offset is None or spans == object_size:
        return uri
    return f"{uri}#{offset}"


def record_write(
    prov: ProvenanceRepository, table: Table, entry: Entry, job: CommitJob
) -> list[str]:
    """Record a write of the merge-on-read table: its log files and any base file it added
    (new keys, or a full write); the FlowFile UUIDs of what it wrote. Recording a commit
    twice adds nothing."""
    writes = [*log_writes(table, entry), *slices_of(table, entry)]
    if not writes:
        return []
    if not is_recorded(prov, table.uri, entry, slice_uuid(writes[0].uri)):
        starts = lineage_starts(prov, parent_uuids(writes, job))
        prov.register_events(commit_events(table.uri, entry, writes, job, starts), sync=True)
    return [slice_uuid(w.uri) for w in writes]


@dataclass(frozen=True)
class Counts:
    """Rows of one read of `flights_enriched`, and how many of them are corrected ones."""

    rows: int
    corrected: int


def counts(table: Table, read_optimized: bool) -> Counts:
    t = table.read(columns=["flight_id", "revision"], read_optimized=read_optimized)
    corrected = pc.sum(pc.equal(t.column("revision"), 2)).as_py() if t.num_rows else 0
    return Counts(t.num_rows, int(corrected or 0))


@dataclass
class CompactionResult:
    """Snapshot and read-optimized reads before and after the compaction, and its instants."""

    snapshot_before: Counts = Counts(0, 0)
    read_optimized_before: Counts = Counts(0, 0)
    groups_with_logs: int = 0
    log_files: int = 0
    instant: str = ""  # "" when no file group had logs to fold
    groups_compacted: int = 0
    snapshot_after: Counts = Counts(0, 0)
    read_optimized_after: Counts = Counts(0, 0)
    #: The compaction's instant objects in timeline order: (object name, action, state), i.e.
    #: `t.compaction.requested`, `t.compaction.inflight`, `t.commit` (completed).
    states: list[tuple[str, str, str]] = field(default_factory=list)


def instant_states(table: Table, time: str) -> list[tuple[str, str, str]]:
    """Every state object of one instant on the active timeline, requested first."""
    objs = [i for i in table.instants.load().objects if i.time == time]
    return [(format_name(i), i.action, i.state.value) for i in sorted(objs, key=_rank)]


def _rank(i: Instant) -> int:
    return i.state.rank


def record_compaction(
    prov: ProvenanceRepository, table: Table, entry: Entry, folded: Mapping[str, FileSlice]
) -> None:
    """Each new base file as a slice replacing the old base, joined from its group's logs."""
    writes = slices_of(table, entry)
    if not writes or is_recorded(prov, table.uri, entry, slice_uuid(writes[0].uri)):
        return
    events = []
    for w in writes:
        sl = folded.get(w.file_group)
        logs = tuple(
            slice_uuid(_log_uri(table, lf.path, lf.offset, lf.size + lf.head, lf.object_size))
            for _, lf in (sl.logs if sl else ())
        )
        job = CommitJob(
            component_id="pipeline.compaction",
            component_type=COMPONENT_TYPE,
            parents=logs,
            details=f"compaction of {tbl.FLIGHTS_ENRICHED}",
        )
        events += commit_events(
            table.uri, entry, [w], job, lineage_starts(prov, parent_uuids([w], job))
        )
    prov.register_events(events, sync=True)


def compact(tables: tbl.Tables, prov: ProvenanceRepository | None) -> CompactionResult:
    """Fold the logs of `flights_enriched` into new base files, with both reads around it."""
    fe = tables.keyed(tbl.FLIGHTS_ENRICHED)
    r = CompactionResult()
    r.snapshot_before = counts(fe, read_optimized=False)
    r.read_optimized_before = counts(fe, read_optimized=True)
    slices = fe.snapshot().merge_on_read_slices() or []
    r.groups_with_logs = sum(1 for sl in slices if sl.logs)
    r.log_files = sum(len(sl.logs) for sl in slices)
    done = fe.maintenance.compact()
    if done is not None:
        r.instant = done.time
        entry = fe.entry(done.time)
        r.groups_compacted = len(entry.added)
        r.states = instant_states(fe, done.time)
        if prov is not None:
            record_compaction(prov, fe, entry, {sl.group: sl for sl in slices})
    r.snapshot_after = counts(fe, read_optimized=False)
    r.read_optimized_after = counts(fe, read_optimized=True)
    return r
