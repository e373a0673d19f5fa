"""Provenance of Spark writes: the post-commit hook that records a `CommitInfo` as NiFi events.

A commit is a `provenance.job_events.JobRun`: RECEIVE per input file (`df.inputFiles()`), the
job as JOIN (CONTENT_MODIFIED for one input, CREATE for none) with component = the Spark
application (component_id = app id, component_type "SparkJob"), FORK to one FlowFile per written
file, SEND per file to its s3a:// (or file://) path. All at the instant's time. The FlowFile
UUIDs derive from (table, instant, file) and every event carries `<table>#instant=<instant>` as
`alternate_identifier_uri`, so recording a commit twice adds nothing (see docs/spark.md).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from provenance import ProvenanceEvent, ProvenanceRepository, ProvenanceSettings
from provenance.job_events import Dataset, JobRun, job_events, record_runs
from storage import ObjectStore, StoreSettings, open_store
from storage.s3a import to_spark_path
from timeline import Table, parse_time

from ..slice_provenance import CommitJob
from ..slice_provenance import record_commit as record_slices
from ..uris import canonical, commit_marker
from .commit_info import (
    JOB_METADATA_KEY,
    REPO_CONF_KEY,
    CommitInfo,
    OutputFile,
    SparkJobInfo,
    add_commit_hook,
    commit_hooks,
    remove_commit_hook,
)
from .paths import table_path

log = logging.getLogger("flowledger.spark")
COMPONENT_TYPE = "SparkJob"


def job_run(info: CommitInfo) -> JobRun:
    """The commit as a job run: inputs, the Spark job, the written files."""
    job = info.job
    marker = commit_marker(info.table_uri, info.instant_time)
    outputs = []
    for f in info.files:
        attrs = {"record.count": str(f.rows)}
        if f.partition:
            attrs["flowledger.partition"] = f.partition
        outputs.append(Dataset(f.uri, f.size, attrs, canonical(f.uri)))
    return JobRun(
        key=marker,
        marker=marker,
        component_id=job.app_id,
        component_type=COMPONENT_TYPE,
        event_time=int(parse_time(info.instant_time).timestamp() * 1000),
        details=f"{job.app_name}: {job.job} {info.operation} {info.table_uri}@{info.instant_time}",
        # Spark does not report input sizes: 0 means unknown here, not empty.
        inputs=tuple(Dataset(p, identity=canonical(p)) for p in job.input_files),
        outputs=tuple(outputs),
        attributes={
            "spark.app.id": job.app_id,
            "spark.app.name": job.app_name,
            "spark.job": job.job,
            "spark.user": job.user,
            "flowledger.table": info.table_uri,
            "flowledger.instant": info.instant_time,
            "flowledger.operation": info.operation,
            "record.count": str(info.rows),
        },
    )


def events_for_commit(info: CommitInfo) -> list[ProvenanceEvent]:
    """The NiFi events one committed Spark write leaves (see the module docstring)."""
    return job_events(job_run(info))


def record_commit(info: CommitInfo, settings: StoreSettings | None = None) -> int:
    """Record a completed Spark write's provenance in `info.repo_uri`, durably; returns how
    many events were new (0 when already recorded, or when no repository is configured).
    The repository is opened for this commit and closed after it: a process that commits many
    times and wants it kept open uses a `CommitRecorder`."""
    with CommitRecorder(settings) as recorder:
        return recorder.record(info)


#: Repositories a `CommitRecorder` keeps open at once; the one used longest ago is closed
#: to open another (a session writing to many repositories does not hold them all).
MAX_OPEN_REPOSITORIES = 4


@dataclass
class _Kept:
    """A repository a recorder keeps open, and how many records are using it: one retired
    (evicted, failed, or its recorder closed) is closed by the last record using it."""

    repo: ProvenanceRepository
    users: int = 0
    retired: bool = False


class CommitRecorder:
    """Records commits into provenance repositories it keeps open between commits: a driver
    that commits many times then reads only what changed since its last commit (HEAD, LIST of
    new journals) and searches only the journals new since (their term filters are kept).
    At most `max_open` repositories are kept open; the one used longest ago is let go, and
    closed once no record is still writing into it. Its creator closes it (or uses it as a
    context manager)."""

    def __init__(
        self,
        settings: StoreSettings | None = None,
        provenance: ProvenanceSettings | None = None,
        max_open: int = MAX_OPEN_REPOSITORIES,
    ) -> None:
        #: How to reach the repositories' stores (None: the AWS_* environment).
        self.settings = settings
        #: The repositories' own settings (e.g. their table's automatic archival).
        self.provenance = provenance or ProvenanceSettings()
        self.max_open = max(1, max_open)
        #: Open repositories by canonical URI, the one used longest ago first.
        self._repos: dict[str, _Kept] = {}
        self._lock = threading.Lock()
        # A session's hook keeps its recorder until the process exits, and nothing closes
        # it then: the repositories still open are let go at exit (or when the recorder is
        # collected), so their background work ends with a close, not with the process.
        weakref.finalize(self, _let_go_all, self._repos, self._lock)

    def repository(self, uri: str) -> ProvenanceRepository:
        """The open provenance repository for `uri` (opened on first use). It stays open
        until the recorder lets it go (`max_open`) or closes."""
        kept, retired = self._take(uri, hold=False)
        _close_all(retired)
        return kept.repo

    def record(self, info: CommitInfo) -> int:
        """`record_commit` on the repository this recorder keeps open for `info.repo_uri`."""
        if not info.repo_uri:
            return 0
        kept, retired = self._take(info.repo_uri, hold=True)
        _close_all(retired)
        try:
            return record_in(kept.repo, info, self.settings)
        except BaseException:
            with self._lock:  # reopen next time: the failure may have left it in any state
                key = canonical(info.repo_uri)
                if self._repos.get(key) is kept:
                    del self._repos[key]
                kept.retired = True
            raise
        finally:
            with self._lock:
                kept.users -= 1
                done = kept.retired and kept.users == 0
            if done:
                with contextlib.suppress(Exception):  # a failure above is the one to report
                    kept.repo.close()

    def _take(self, uri: str, *, hold: bool) -> tuple[_Kept, list[_Kept]]:
        """The kept repository for `uri` (opened now if need be; `hold`: counted as in use
        until the caller lets it go), and the repositories let go to make room that no
        record is using (for the caller to close, outside the lock)."""
        key = canonical(uri)
        let_go: list[_Kept] = []
        with self._lock:
            kept = self._repos.pop(key, None)
            if kept is None:
                store = open_store(uri, self.settings)
                # No maintenance thread: a recorder only appends (durably, each commit),
                # rollovers are the repository owner's (the service, `flowledger` commands).
                repo = ProvenanceRepository.open(
                    store, self.provenance, recover=False, background=False
                )
                kept = _Kept(repo)
                while len(self._repos) >= self.max_open:
                    let_go.append(self._repos.pop(next(iter(self._repos))))
            self._repos[key] = kept  # (re)inserted: now the one used last
            if hold:
                kept.users += 1
            return kept, _retire(let_go)

    def close(self) -> None:
        """Let every repository go: each is closed now, or by the last record using it."""
        _let_go_all(self._repos, self._lock)

    def __enter__(self) -> CommitRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _retire(kept: list[_Kept]) -> list[_Kept]:
    """Mark `kept` retired (under the recorder's lock); those no record is using, to close."""
    for k in kept:
        k.retired = True
    return [k for k in kept if k.users == 0]


def _let_go_all(repos: dict[str, _Kept], lock: threading.Lock) -> None:
    """Retire every repository of `repos`, closing those no record is using."""
    with lock:
        kept = list(repos.values())
        repos.clear()
        idle = _retire(kept)
    _close_all(idle)


def _close_all(kept: list[_Kept]) -> None:
    for k in kept:
        k.repo.close()


def record_in_store(store: ObjectStore, info: CommitInfo) -> int:
    """`record_commit` on a repository opened for this one commit (a cold driver)."""
    with ProvenanceRepository.open(store, recover=False) as repo:
        return record_in(repo, info)


def record_in(
    repo: ProvenanceRepository, info: CommitInfo, settings: StoreSettings | None = None
) -> int:
    """Record one commit in `repo`: a keyed write's slices as the Python path records them
    (a JOIN per new slice naming the job and the slice it superseded, the job's input files
    received), any other write as its job run (see the module docstring)."""
    if not info.keyed:
        return record_runs(repo, [job_run(info)])
    if info.store is not None:  # the writer's table handle's: it stays open
        return _record_keyed(repo, info, info.store)
    store = open_store(table_path(info.table_uri).store_uri, settings)
    try:
        return _record_keyed(repo, info, store)
    finally:
        store.close()


def _record_keyed(repo: ProvenanceRepository, info: CommitInfo, store: ObjectStore) -> int:
    if info.entry is not None:  # the writer's own entry: no read of the timeline
        table, entry = Table(store), info.entry
    else:
        table = Table.open(store)
        entry = table.entry(info.instant_time)
    job = info.job
    run = CommitJob(
        component_id=job.app_id,
        component_type=COMPONENT_TYPE,
        inputs=job.input_files,
        details=f"{job.app_name}: {job.job} {info.operation} {info.table_uri}@{info.instant_time}",
    )
    return record_slices(repo, table, entry, run)


@dataclass(frozen=True)
class ProvenanceHook:
    """The installed hook, holding how to reach the repository's store (None: the AWS_*
    environment). It carries its settings itself because the data source runs it in Spark's
    commit worker, a Python process where `install` never ran: Spark pickles it there with the
    data source's driver facts, so the worker records with the session's s3a settings.

    On the driver (keyed writes, `flowledger.spark.write`) it records through `recorder`,
    which keeps the repository open from one commit to the next, as the session keeps its
    table handles: a commit then reads only the journals new since the last. Pickled, it
    leaves the recorder behind: the commit worker opens the repository for its one commit
    and closes it."""

    settings: StoreSettings | None = None
    recorder: CommitRecorder | None = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProvenanceHook, (self.settings,))

    def close(self) -> None:
        """Close the repositories the hook kept open (it records on, opening them again)."""
        if self.recorder is not None:
            self.recorder.close()

    def __call__(self, info: CommitInfo) -> None:
        # The write is already committed, so a failure here must not fail it.
        try:
            if self.recorder is None:
                record_commit(info, self.settings)
            else:
                self.recorder.record(info)
        except Exception:
            log.exception(
                "flowledger: commit %s of %s succeeded but its provenance was not recorded; "
                "run flowledger.spark.catch_up(%r, %r) to record it",
                info.instant_time,
                info.table_uri,
                info.table_uri,
                info.repo_uri,
            )


def install(spark: Any, settings: StoreSettings | None = None) -> None:
    """Record provenance after every write made through `spark` (idempotent; the latest
    settings replace earlier ones). The hook is kept by the session and goes with it.

    `settings`: how to reach the repository's store (default: the AWS_* environment, like
    every flowledger command). Warns when the session names no repository
    (`spark.flowledger.repo`). The hook keeps the repositories it records into open for the
    session (`ProvenanceHook`); a hook replaced by one of other settings closes them."""
    kept = None
    for hook in commit_hooks(spark):
        if isinstance(hook, ProvenanceHook):
            if kept is None and hook.settings == settings and hook.recorder is not None:
                kept = hook
                continue
            remove_commit_hook(spark, hook)
            hook.close()
    if kept is None:
        add_commit_hook(spark, ProvenanceHook(settings, CommitRecorder(settings)))
    if not spark.conf.get(REPO_CONF_KEY, None):
        log.warning(
            "flowledger: %s is not set on this session; Spark writes record no provenance",
            REPO_CONF_KEY,
        )


def commits_of(
    table_uri: str, repo_uri: str, settings: StoreSettings | None = None
) -> list[CommitInfo]:
    """Every live commit of a table made by a Spark writer, rebuilt from the timeline alone."""
    table = Table.open(open_store(table_uri, settings))
    base = to_spark_path(table_uri)
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
                keyed="keyed" in entry.metadata,
            )
        )
    return out


def catch_up(table_uri: str, repo_uri: str, settings: StoreSettings | None = None) -> int:
    """Record the Spark commits of a table whose events are missing (the driver died between
    the commit and its hook), from the timeline alone. Returns how many events were added."""
    commits = commits_of(table_uri, repo_uri, settings)
    runs = [job_run(info) for info in commits if not info.keyed]
    with ProvenanceRepository.open(open_store(repo_uri, settings), recover=False) as repo:
        added = record_runs(repo, runs)
        return added + sum(record_in(repo, info, settings) for info in commits if info.keyed)
