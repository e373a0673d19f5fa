"""Provenance of Spark writes: the post-commit hook that turns a `CommitInfo` into NiFi events.

One commit becomes, in this order (all at the instant's time, component = the Spark job):

    RECEIVE  per input file      FlowFile I_k, transit URI = the file
    JOIN     the job             FlowFile J, parents I_1..I_n, child J      (n >= 2)
    CONTENT_MODIFIED             FlowFile J = I_1                            (n == 1)
    CREATE                       FlowFile J                                  (n == 0)
    FORK     the job's output    FlowFile J, parent J, children O_1..O_m
    SEND     per written file    FlowFile O_k, transit URI = the s3a:// (or file://) path

FlowFile UUIDs are uuid5 of (table, instant, role, file), so the same commit always yields the
same events: a second recording finds the job FlowFile's events and is skipped. Every event
carries `alternate_identifier_uri` = `<table>#instant=<instant>` so SQL can select one commit.
NiFi's lineage of O_k shows the FORK; `upstream` follows parents back to every RECEIVE.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from typing import Any

from provenance import (
    Lineage,
    ProvenanceEvent,
    ProvenanceRepository,
    Query,
    SearchTerm,
)
from provenance.lineage import compute_lineage
from storage import StoreSettings, open_store
from storage.uri import parse_uri
from timeline.instant import parse_time
from timeline.table import Table

from .commit_info import (
    JOB_METADATA_KEY,
    REPO_CONF_KEY,
    CommitInfo,
    OutputFile,
    SparkJobInfo,
    add_commit_hook,
)

log = logging.getLogger("flowledger.spark")

#: Namespace of the FlowFile UUIDs of Spark commits (fixed: changing it breaks idempotency).
NAMESPACE = uuid.UUID("6f1c9b2e-5d1a-5c7e-9a43-0f5e2b8d7c11")
COMPONENT_TYPE = "SparkJob"


def canonical(uri: str) -> str:
    """One spelling per file or table: s3a:// -> s3://, local paths absolute file://."""
    if "://" in uri and uri.split("://", 1)[0].lower() not in ("file", "s3", "s3a"):
        return uri  # hdfs://, gs://...: kept as Spark named it
    try:
        return str(parse_uri(uri))
    except ValueError:
        return uri


def flowfile_uuid(table_uri: str, instant: str, role: str, name: str = "") -> str:
    key = "\n".join((canonical(table_uri), instant, role, canonical(name) if name else ""))
    return str(uuid.uuid5(NAMESPACE, key))


def commit_marker(table_uri: str, instant: str) -> str:
    return f"{canonical(table_uri)}#instant={instant}"


def events_for_commit(info: CommitInfo) -> list[ProvenanceEvent]:
    """The NiFi events one committed Spark write leaves (see the module docstring)."""
    job = info.job
    t = int(parse_time(info.instant_time).timestamp() * 1000)
    marker = commit_marker(info.table_uri, info.instant_time)
    common: dict[str, Any] = {
        "component_id": job.app_id,
        "component_type": COMPONENT_TYPE,
        "event_time": t,
        "lineage_start_date": t,
        "alternate_identifier_uri": marker,
    }
    inputs = sorted(set(job.input_files))
    in_ids = [flowfile_uuid(info.table_uri, info.instant_time, "input", f) for f in inputs]
    out_ids = [
        flowfile_uuid(info.table_uri, info.instant_time, "output", f.uri) for f in info.files
    ]
    events = [
        ProvenanceEvent(
            "RECEIVE",
            ff,
            file_size=0,  # Spark does not report input sizes; unknown, not empty
            transit_uri=path,
            source_system_flowfile_identifier=path,
            details=f"{job.app_name}: read",
            updated_attributes=_file_attrs(path),
            **common,
        )
        for ff, path in zip(in_ids, inputs, strict=True)
    ]
    job_attrs = {
        "spark.app.id": job.app_id,
        "spark.app.name": job.app_name,
        "spark.job": job.job,
        "spark.user": job.user,
        "flowledger.table": info.table_uri,
        "flowledger.instant": info.instant_time,
        "flowledger.operation": info.operation,
        "record.count": str(info.rows),
    }
    details = f"{job.app_name}: {job.job} {info.operation} {info.table_uri} @ {info.instant_time}"
    size = sum(f.size for f in info.files)
    if len(in_ids) == 1:
        job_ff = in_ids[0]
        events.append(
            ProvenanceEvent(
                "CONTENT_MODIFIED", job_ff, file_size=size, previous_file_size=0,
                details=details, updated_attributes=job_attrs, **common,
            )
        )  # fmt: skip
    else:
        job_ff = flowfile_uuid(info.table_uri, info.instant_time, "job")
        kind = "JOIN" if in_ids else "CREATE"
        events.append(
            ProvenanceEvent(
                kind, job_ff, file_size=size, parent_uuids=tuple(in_ids),
                child_uuids=(job_ff,) if in_ids else (), details=details,
                updated_attributes=job_attrs, **common,
            )
        )  # fmt: skip
    if out_ids:
        events.append(
            ProvenanceEvent(
                "FORK", job_ff, file_size=size, parent_uuids=(job_ff,),
                child_uuids=tuple(out_ids), details=details, **common,
            )
        )  # fmt: skip
    for ff, f in zip(out_ids, info.files, strict=True):
        attrs = {**_file_attrs(f.uri), "record.count": str(f.rows)}
        if f.partition:
            attrs["flowledger.partition"] = f.partition
        events.append(
            ProvenanceEvent(
                "SEND", ff, file_size=f.size, transit_uri=f.uri,
                details=f"{job.app_name}: wrote {info.table_uri} @ {info.instant_time}",
                updated_attributes=attrs, **common,
            )
        )  # fmt: skip
    return events


def _file_attrs(path: str) -> dict[str, str]:
    head, name = posixpath.split(path)
    return {"filename": name, "path": head + "/"}


def job_flowfile(info: CommitInfo) -> str:
    """The FlowFile whose events mark the commit as recorded (the first input's when one)."""
    inputs = sorted(set(info.job.input_files))
    if len(inputs) == 1:
        return flowfile_uuid(info.table_uri, info.instant_time, "input", inputs[0])
    return flowfile_uuid(info.table_uri, info.instant_time, "job")


def is_recorded(repo: ProvenanceRepository, info: CommitInfo) -> bool:
    """Whether this commit's events are already in `repo` (they are written in one journal)."""
    marker = commit_marker(info.table_uri, info.instant_time)
    found = repo.query(Query((SearchTerm("flowfile_uuid", job_flowfile(info)),), max_results=50))
    return any(e.alternate_identifier_uri == marker for e in found)


def record_into(repo: ProvenanceRepository, info: CommitInfo) -> int:
    """Register the commit's events durably in an open repository; 0 if already there."""
    if is_recorded(repo, info):
        return 0
    events = events_for_commit(info)
    # One synchronous batch is one journal object: the commit's events land all or none.
    return len(repo.register_events(events, sync=True))


def record_commit(info: CommitInfo, settings: StoreSettings | None = None) -> int:
    """Record a completed Spark write's provenance in `info.repo_uri`; returns new events.

    Idempotent: a commit already recorded adds nothing. No repository configured: 0."""
    if not info.repo_uri:
        return 0
    with ProvenanceRepository(open_store(info.repo_uri, settings), recover=False) as repo:
        return record_into(repo, info)


def _hook(info: CommitInfo) -> None:
    """The installed hook: the write is already committed, so a failure here must not fail it."""
    try:
        record_commit(info)
    except Exception:
        log.exception(
            "flowledger: commit %s of %s succeeded but its provenance was not recorded; "
            "run flowledger.spark.catch_up(%r, %r) to record it",
            info.instant_time,
            info.table_uri,
            info.table_uri,
            info.repo_uri,
        )


def install(spark: Any = None) -> None:
    """Record provenance after every Spark write of this process (idempotent).

    With `spark`, warn when the session names no repository (`spark.flowledger.repo`)."""
    add_commit_hook(_hook)
    if spark is not None and not spark.conf.get(REPO_CONF_KEY, None):
        log.warning(
            "flowledger: %s is not set on this session; Spark writes record no provenance",
            REPO_CONF_KEY,
        )


def commits_of(
    table_uri: str, repo_uri: str, settings: StoreSettings | None = None
) -> list[CommitInfo]:
    """Every live commit of a table made by a Spark writer, rebuilt from the timeline alone."""
    table = Table.open(open_store(table_uri, settings))
    base = _spark_path(table_uri)
    out = []
    for entry in table.state().ordered_writes():
        job = entry.extra.get(JOB_METADATA_KEY)
        if job is None:
            continue
        files = tuple(
            OutputFile(f"{base}/{f.path}", f.rows, f.size, f.partition) for f in entry.added
        )
        out.append(
            CommitInfo(
                table_uri=table_uri,
                instant_time=entry.time,
                action=entry.action,
                operation=entry.extra.get("operation", entry.action),
                files=files,
                job=SparkJobInfo.from_json(job),
                repo_uri=repo_uri,
            )
        )
    return out


def _spark_path(uri: str) -> str:
    from storage.s3a import to_spark_path

    return to_spark_path(uri)


def catch_up(table_uri: str, repo_uri: str, settings: StoreSettings | None = None) -> int:
    """Record the Spark commits of a table whose events are missing (the driver died between
    the commit and its hook). Returns how many events were added."""
    added = 0
    with ProvenanceRepository(open_store(repo_uri, settings), recover=False) as repo:
        for info in commits_of(table_uri, repo_uri, settings):
            added += record_into(repo, info)
    return added


def upstream_events(
    repo: ProvenanceRepository, flowfile: str, limit: int = 10_000
) -> list[ProvenanceEvent]:
    """Events of `flowfile` and of every ancestor: NiFi's lineage after "expand parents" on
    each FORK/JOIN, so an output file's history reaches the files the job read."""
    seen: set[str] = set()
    frontier = [flowfile]
    events: dict[int, ProvenanceEvent] = {}
    while frontier:
        ff = frontier.pop()
        if ff in seen:
            continue
        seen.add(ff)
        for e in repo.query(Query((SearchTerm("flowfile_uuid", ff),), max_results=limit + 1)):
            events[e.event_id] = e
            if e.flowfile_uuid == ff or ff in e.child_uuids:  # ff's history, not its children
                frontier += [p for p in (e.flowfile_uuid, *e.parent_uuids) if p not in seen]
        if len(events) > limit:
            raise ValueError(f"the ancestry of {flowfile} has more than {limit} events")
    return sorted(events.values(), key=lambda e: (e.event_time, e.event_id))


def upstream(repo: ProvenanceRepository, flowfile: str, limit: int = 10_000) -> Lineage:
    """The lineage graph of `flowfile` with all its ancestors (see `upstream_events`)."""
    events = upstream_events(repo, flowfile, limit)
    ids = {e.flowfile_uuid for e in events} | {p for e in events for p in e.parent_uuids}
    return compute_lineage(events, ids | {flowfile}, limit)


def input_files(repo: ProvenanceRepository, flowfile: str) -> list[str]:
    """The files a FlowFile came from: transit URIs of RECEIVE/FETCH events among its ancestors."""
    return sorted(
        {
            e.transit_uri
            for e in upstream_events(repo, flowfile)
            if e.event_type in ("RECEIVE", "FETCH") and e.transit_uri
        }
    )
