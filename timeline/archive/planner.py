"""Which completed instants an archival run moves out of the active timeline (Hudi's
HoodieTimelineArchiver.getInstantsToArchive, adapted).

Commits (commit, deltacommit, replacecommit, compaction): nothing happens until completed
commits exceed `keep_max_commits`; then the oldest are archived until `keep_min_commits`
remain, but never at or past
  * the earliest pending instant (a write, a compaction or clustering plan, a service),
  * the first savepoint (with `archive_beyond_savepoint`, only savepointed commits are
    skipped),
  * a completed clustering/replacecommit whose replaced files are not cleaned yet (a reader
    of the archived replace would otherwise see both old and new files),
  * the oldest commit the latest clean retains (`retain_from_seq`: what the cleaner's
    retention still reads).
Clean, rollback and restore instants older than the last archived commit go with it; when
there are more than `keep_max_commits` of them, the oldest go down to `keep_min_commits`
(within the same limits). Savepoints and pending instants are never archived.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..active import Timeline
from ..instant import CLEAN, REPLACE_COMMIT, RESTORE, ROLLBACK, SAVEPOINT, WRITE_ACTIONS, Instant
from ..metadata import Entry
from ..settings import ArchivalSettings
from ..snapshot import TableState

SERVICE_ACTIONS = frozenset({CLEAN, ROLLBACK, RESTORE})


@dataclass(frozen=True)
class ArchivePlan:
    instants: tuple[Instant, ...]
    #: Why archival stopped where it did (for `timeline archive` output and tests).
    limit: str
    limit_reason: str


def plan_archival(
    timeline: Timeline,
    entry_of: Callable[[Instant], Entry],
    state: TableState,
    settings: ArchivalSettings,
) -> ArchivePlan:
    completed = timeline.completed()
    commits = [i for i in completed if i.action in WRITE_ACTIONS]
    limits: list[tuple[str, str]] = []
    pending = timeline.pending().first()
    if pending is not None:
        limits.append((pending.time, f"pending {pending.action} {pending.time}"))
    savepoints = sorted({i.time for i in timeline if i.action == SAVEPOINT})
    if savepoints and not settings.archive_beyond_savepoint:
        limits.append((savepoints[0], f"savepoint {savepoints[0]}"))
    cleaned = state.cleaned()
    for i in commits:
        if i.action == REPLACE_COMMIT:
            replaced = {f.path for f in entry_of(i).replaced}
            if not replaced <= cleaned:
                limits.append((i.time, f"replacecommit {i.time} (replaced files not cleaned)"))
                break
    retain_from = state.cleaned_before_seq()
    if retain_from:
        kept = next((i for i in commits if (i.seq or 0) >= retain_from), None)
        if kept is not None:
            limits.append((kept.time, f"cleaner retains from {kept.time}"))
    limit, reason = min(limits, default=("", ""))

    def allowed(i: Instant) -> bool:
        return (not limit or i.time < limit) and i.time not in savepoints

    out: list[Instant] = []
    if len(commits) > settings.keep_max_commits:
        budget = len(commits) - settings.keep_min_commits
        out = [i for i in commits if allowed(i)][: max(0, budget)]
        if not reason and budget >= 0:
            reason = f"keep_min_commits={settings.keep_min_commits}"
    last = max((i.time for i in out), default="")
    services = [i for i in completed if i.action in SERVICE_ACTIONS and allowed(i)]
    chosen = {(i.time, i.action) for i in out}
    extra = [i for i in services if last and i.time < last]
    if len(services) > settings.keep_max_commits:
        extra += services[: len(services) - settings.keep_min_commits]
    for i in extra:
        if (i.time, i.action) not in chosen:
            chosen.add((i.time, i.action))
            out.append(i)
    out.sort(key=lambda i: i.sort_key)
    return ArchivePlan(tuple(out), limit, reason)
