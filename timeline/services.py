"""Table services: rollback, clean, savepoint, restore. Each writes its plan into its first
state object, completes through the commit log, then carries out its side effects
(idempotently, so whoever finds it interrupted can finish it)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from storage import NotFound

from .errors import CommitConflict, InstantNotFound, PlanError
from .file_groups import retention
from .file_groups.log_files import log_objects_of
from .file_groups.sidecars import WRITE_STATS, sidecars
from .instant import (
    CLEAN,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    format_name,
)
from .layout import data_prefix
from .recovery import finish_service, read_plan
from .settings import KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS

if TYPE_CHECKING:
    from .snapshot import TableState
    from .table import Table


def run_service(
    table: Table,
    action: str,
    metadata: Mapping[str, Any],
    base: int,
    instant_time: str | None = None,
) -> Instant:
    plan = {"operation": action, "base": base, "metadata": dict(metadata)}
    txn = table.begin(action, plan=plan, instant_time=instant_time)
    txn.base = min(txn.base, base)
    try:
        return txn.complete(metadata)
    except CommitConflict as exc:
        if exc.winner != txn.instant_time:
            raise
        done = table.timeline().completed().get(txn.instant_time, action)
        if done is None:
            raise
        return done  # another process finished this very plan


# -- rollback --------------------------------------------------------------------------------------
def rollback(table: Table, instant_time: str) -> Instant:
    """Roll back a pending write, or the latest completed write (restore undoes more)."""
    timeline = table.timeline()
    base = table.instants.latest_seq
    target = next(
        (i for i in timeline if i.time == instant_time and i.action in WRITE_ACTIONS), None
    )
    if target is None:
        raise InstantNotFound(f"no write instant {instant_time} on the timeline of {table.uri}")
    for pending in timeline.pending().actions(ROLLBACK):
        plan = read_plan(table, pending).get("metadata")
        if isinstance(plan, dict) and plan.get("target_time") == instant_time:
            finish_service(table, pending)  # Hudi reuses the interrupted rollback's plan
            return table.timeline().get(pending.time, ROLLBACK) or pending
    if target.is_pending:
        # Validate from the target's own base: its completion, if any, comes after that.
        with contextlib.suppress(NotFound):  # deleted meanwhile: its rollback is done
            base = min(base, int(str(read_plan(table, target).get("base", base))))
        files = [o.key for o in table.store.list(data_prefix(instant_time))]
        metadata = {
            "target_time": instant_time,
            "target_action": target.action,
            "target_state": "pending",
            "deleted": files,
            "rolled_back": [],
        }
        return run_service(table, ROLLBACK, metadata, base)
    st = table.state(refresh=False)
    later = [e for e in st.ordered_writes() if e.seq > (target.seq or 0)]
    if later:
        raise PlanError(
            f"cannot roll back {instant_time}: {len(later)} later commit(s) completed after it "
            f"(the latest is {later[-1].time}); savepoint an instant and restore to it instead"
        )
    before = max((e.seq for e in st.ordered_writes() if e.seq < (target.seq or 0)), default=0)
    gone = cleaned_files_read_at(st, before) if before else set()
    if gone:
        raise PlanError(
            f"cannot roll back {instant_time}: the snapshot before it reads {len(gone)} file(s) "
            f"a clean deleted (e.g. {min(gone)}; {st.retention()}); savepoint an instant to "
            "keep it restorable"
        )
    entry = table.tl.entry_of(target)
    metadata = {
        "target_time": instant_time,
        "target_action": target.action,
        "target_state": "completed",
        "deleted": [f.path for f in entry.added] + log_objects_of(entry.metadata),
        "rolled_back": [format_name(target)],
    }
    return run_service(table, ROLLBACK, metadata, base)


def cleaned_files_read_at(st: TableState, seq: int) -> set[str]:
    """The files the snapshot at log position `seq` reads (merge-on-read: its slices' bases
    and logs) that a clean has deleted: empty when that snapshot is still whole."""
    cleaned = st.cleaned()
    if not cleaned:
        return set()
    if st.is_merge_on_read():
        return retention.slice_paths(st, [seq]) & cleaned
    return set(st.snapshot(seq).paths()) & cleaned


# -- clean -----------------------------------------------------------------------------------------
def plan_clean(table: Table, policy: str, retained: int) -> dict[str, Any] | None:
    st = table.state()
    writes = st.ordered_writes()
    protected = {p for sp in st.savepoints.values() for p in sp.metadata.get("files", ())}
    cleaned = st.cleaned()
    candidates = {p for p in st.all_files() if p not in cleaned}
    mor = st.is_merge_on_read()
    if mor:  # log files too; a slice is kept or cleaned whole (keyed/retention.py)
        candidates |= retention.log_candidates(st)
        protected |= retention.pending_compaction_paths(table)
        protected |= retention.slice_paths(
            st, (int(sp.metadata.get("savepointed_seq", 0)) for sp in st.savepoints.values())
        )
    if policy == KEEP_LATEST_COMMITS:
        if len(writes) <= retained:
            return None
        kept = writes[-retained:]
        if mor:
            needed = retention.slice_paths(st, (e.seq for e in kept))
        else:
            needed = {f.path for e in kept for f in st.snapshot(e.seq).files}
        retain_from = kept[0].seq
    elif policy == KEEP_LATEST_FILE_VERSIONS:
        if mor:
            needed = retention.newest_versions(st, retained)
        else:
            needed = {f.path for fs in st.file_slices().values() for f in fs[-retained:]}
        retain_from = writes[-1].seq if writes else 0
    else:
        raise PlanError(f"unknown cleaner policy {policy!r}")
    deleted = sorted(candidates - needed - protected)
    if not deleted:
        return None
    # Keyed tables keep big bloom filters in sidecar objects next to their data files.
    gone = set(deleted)
    deleted += sidecars([s for e in writes for s in e.metadata.get(WRITE_STATS, ())], gone)
    return {
        "policy": policy,
        "retained": retained,
        "deleted": deleted,
        "retain_from_seq": retain_from,
    }


def clean(table: Table, policy: str | None = None, retained: int | None = None) -> Instant | None:
    """Delete files no retained snapshot reads. None when there is nothing to clean."""
    policy = policy or table.settings.cleaner_policy
    if retained is None:
        retained = (
            table.settings.cleaner_commits_retained
            if policy == KEEP_LATEST_COMMITS
            else table.settings.cleaner_fileversions_retained
        )
    if policy not in (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS):
        raise PlanError(f"unknown cleaner policy {policy!r}")
    metadata = plan_clean(table, policy, retained)
    if metadata is None:
        return None
    return run_service(table, CLEAN, metadata, table.instants.latest_seq)


# -- savepoint and restore -------------------------------------------------------------------------
def savepoint(table: Table, instant_time: str) -> Instant:
    """Keep the snapshot as of a completed commit from being cleaned (restorable)."""
    st = table.state()
    entry = st.writes.get(instant_time)
    if entry is None:
        raise InstantNotFound(f"no completed commit {instant_time} in {table.uri} to savepoint")
    if instant_time in st.savepoints:
        raise PlanError(f"{instant_time} is already savepointed")
    files = st.snapshot(entry.seq).paths()
    gone = set(files) & st.cleaned()
    if gone:
        raise PlanError(
            f"cannot savepoint {instant_time}: its file {sorted(gone)[0]} was already cleaned"
        )
    metadata = {"files": files, "savepointed_seq": entry.seq}
    return run_service(table, SAVEPOINT, metadata, table.instants.latest_seq, instant_time)


def restore(table: Table, instant_time: str) -> Instant:
    """Roll the table back to a savepoint: every later commit is undone, newest first."""
    st = table.state()
    sp = st.savepoints.get(instant_time)
    if sp is None:
        raise PlanError(
            f"cannot restore to {instant_time}: it is not a savepoint (savepoint it first)"
        )
    seq = st.writes[instant_time].seq if instant_time in st.writes else sp.seq
    timeline = table.timeline(refresh=False)
    later = sorted(
        (
            i
            for i in timeline.completed()
            if (i.action in WRITE_ACTIONS and (i.seq or 0) > seq)
            or (i.action == SAVEPOINT and i.time > instant_time)
        ),
        key=lambda i: -(i.seq or 0),
    )
    deleted = []
    for i in later:
        if i.action in WRITE_ACTIONS:
            e = table.tl.entry_of(i)
            deleted += [f.path for f in e.added] + log_objects_of(e.metadata)
    metadata = {
        "target_time": instant_time,
        "rolled_back": [format_name(i) for i in later],
        "deleted": deleted,
    }
    return run_service(table, RESTORE, metadata, table.instants.latest_seq)


__all__ = ["clean", "restore", "rollback", "savepoint"]
