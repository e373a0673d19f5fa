"""Compaction of merge-on-read tables: a file group's base file and logs folded into a new
base file, planned in `compaction.requested` and executed later, by anyone, idempotently.

- **Schedule** (when a trigger fires, settings.py): the plan names, per file group, the base
  file and the log files of its slice, and the log position it was made at
  (`log_anchor_seq`). File groups in a pending compaction or clustering are left out; the
  log-size strategy orders groups by log bytes and keeps those above
  `compaction_log_file_size_threshold`.
- **Execute**: `compaction.inflight`, then one new base file per planned group at a name
  fixed by the plan (`<group>_<compaction instant>.parquet`), so running the plan again after
  a crash writes the same objects; it completes as a `commit` of the compaction's instant
  time (Hudi's `t.compaction.requested`, `t.compaction.inflight`, `t.commit`) whose metadata
  carries the anchor and the operation `compact`. Until it completes its base files are in
  no commit, so a half-written one is never read.
- It never conflicts with delta commits: their logs completing after the anchor belong to
  the new slice (slices.py). A pending compaction is never rolled back as a failed write: a
  process that finds one whose heartbeat expired (or that was only scheduled) executes it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from storage import Conflict, NotFound

from ... import crash
from ...commit import materialize
from ...errors import (
    CommitConflict,
    InstantNotFound,
    MissingTableObject,
    PlanError,
    TimelineError,
)
from ...file_groups import COMPACTION_DETAIL, FileSlice, is_compaction
from ...file_groups.sidecars import WRITE_STATS
from ...heartbeat import last_beat
from ...instant import (
    COMMIT,
    COMPACT_OPERATION,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    TIME_FORMAT,
    Instant,
    State,
)
from ...layout import data_prefix, heartbeat_key, instant_key
from ...metadata import DataFile, Entry, decode_plan, encode_plan
from ...task_writer import WriteTarget
from ...txn import Transaction
from ..keys import integer_key_column
from ..log import LogCache
from .task import CompactionWork, compact_file_group

if TYPE_CHECKING:
    from ...snapshot import TableState
    from ..context import KeyedTable

log = logging.getLogger("flowledger.timeline")

NUM_COMMITS = "NUM_COMMITS"
TIME_ELAPSED = "TIME_ELAPSED"
NUM_OR_TIME = "NUM_OR_TIME"
NUM_AND_TIME = "NUM_AND_TIME"
TRIGGERS = (NUM_COMMITS, TIME_ELAPSED, NUM_OR_TIME, NUM_AND_TIME)
LOG_SIZE = "log_size"  # Hudi's LogFileSizeBasedCompactionStrategy
STRATEGIES = (LOG_SIZE,)


#: Log bytes of a plan up to which a compaction in one process keeps the plan's log objects
#: in memory while it runs, so each is fetched once (whole), not once per file group.
CACHED_LOGS = 256 * 1024 * 1024


def _parse_time(t: str) -> datetime:
    return datetime.strptime(t + "000", TIME_FORMAT).replace(tzinfo=UTC)


def _pending_plans(table: KeyedTable) -> list[tuple[Instant, dict[str, Any]]]:
    out = []
    for i in table.timeline(refresh=False).pending():
        if i.action not in (COMPACTION, REPLACE_COMMIT):
            continue
        state = Instant(i.time, i.action, State.REQUESTED)
        try:
            body = table.tl.states.read(state)
        except Exception:
            continue
        out.append((i, decode_plan(body, table.store.url(instant_key(state)))))
    return out


def trigger_fires(table: KeyedTable, st: TableState, now: datetime | None = None) -> bool:
    """Hudi's inline trigger: delta commits since the latest compaction (pending or done)
    reach `compaction_max_delta_commits`, and/or `compaction_max_delta_seconds` passed."""
    s = table.settings
    last = max(
        [*completed_compactions(st), *(i.time for i in pending(table, refresh=False))], default=""
    )
    deltas = [e for e in st.ordered_writes() if e.action == DELTA_COMMIT and e.time > last]
    by_num = len(deltas) >= s.compaction_max_delta_commits
    since = last or (deltas[0].time if deltas else "")
    now = now or datetime.now(UTC)
    by_time = bool(since) and (now - _parse_time(since)).total_seconds() >= (
        s.compaction_max_delta_seconds
    )
    trig = s.compaction_trigger
    if trig == NUM_COMMITS:
        return by_num
    if trig == TIME_ELAPSED:
        return by_time
    if trig == NUM_OR_TIME:
        return by_num or by_time
    return by_num and by_time


def plan_compaction(table: KeyedTable, st: TableState) -> list[dict[str, Any]]:
    """The operations of a plan: every slice with logs, not in a pending compaction or
    clustering, with at least the threshold of log bytes; most log bytes first."""
    busy: set[str] = set()
    paths: set[str] = set()
    for _, plan in _pending_plans(table):
        for op in plan.get(COMPACTION_DETAIL, {}).get("operations", ()):
            busy.add(str(op["file_group"]))
        for group in plan.get("groups", ()):
            paths.update(str(p) for p in group)
    threshold = table.settings.compaction_log_file_size_threshold
    ops: list[dict[str, Any]] = []
    for sl in st.latest_slices().values():
        if not sl.logs or sl.group in busy or sl.base.path in paths:
            continue
        if sl.log_bytes < threshold:
            continue
        ops.append(
            {
                "file_group": sl.group,
                "partition": sl.partition,
                "base_path": sl.base.path,
                "log_paths": [lf.ref for _, lf in sl.logs],  # blocks, by LogFile.ref
                "log_bytes": sl.log_bytes,
            }
        )
    ops.sort(key=lambda op: (-int(op["log_bytes"]), str(op["file_group"])))
    return ops


def schedule(table: KeyedTable, *, force: bool = False) -> str | None:
    """Write `compaction.requested` with a plan when the trigger fires (or `force`); its
    instant time, or None when there is nothing to compact."""
    st = table.state()
    if not force and not trigger_fires(table, st):
        return None
    ops = plan_compaction(table, st)
    if not ops:
        return None
    anchor = max((e.seq for e in st.entries), default=0)
    body = {
        "writer": table.settings.writer_id,
        "base": anchor,
        "operation": COMPACT_OPERATION,
        COMPACTION_DETAIL: {"log_anchor_seq": anchor, "operations": ops},
    }
    t = table.times.new()
    for _ in range(1000):
        try:
            table.tl.states.create(Instant(t, COMPACTION, State.REQUESTED), encode_plan(body))
        except Conflict:
            t = table.times.after(t)
            continue
        if any(i.action != COMPACTION for i in table.tl.states.of_time(t)):
            table.tl.states.delete([Instant(t, COMPACTION, State.REQUESTED)])
            t = table.times.after(t)
            continue
        break
    else:  # pragma: no cover
        raise TimelineError(f"could not find a free instant time in {table.uri}")
    crash.point(f"{COMPACTION}.requested")
    table.instants.load()  # the listing now shows it pending (the trigger counts it)
    return t


def _planned_slices(st: TableState, ops: Sequence[dict[str, Any]]) -> list[FileSlice | None]:
    """Each planned slice, or None where the plan no longer fits the table (a planned log's
    delta commit was rolled back, or the base was replaced). The file groups are folded once
    for the whole plan: folded per operation, they were most of a compaction of many file
    groups after many delta commits."""
    groups = st.file_groups().groups
    out: list[FileSlice | None] = []
    for op in ops:
        fg = groups.get(str(op["file_group"]))
        planned = None if fg is None else fg.planned_slice(str(op["base_path"]), op["log_paths"])
        out.append(planned)
    return out


def _discard(table: KeyedTable, t: str) -> None:
    """Drop a plan the table no longer fits: its files, heartbeat and pending states. The
    files only if `t` never completed: a completed compaction's base files are read by
    snapshots, whatever is left of its plan's objects."""
    store = table.store
    if t not in table.state().writes:
        store.delete_many([o.key for o in store.list(data_prefix(t))])
    store.delete(heartbeat_key(t))
    mine = [i for i in table.tl.states.of_time(t) if i.is_pending]
    table.tl.states.delete(sorted(mine, key=lambda i: -i.state.rank))


class _CompactionTxn(Transaction):
    def abort(self) -> None:
        """A conflicting completion is handled by `execute` (the plan may have completed
        under another executor, whose files share this prefix): never delete here."""
        self._done = True
        self._heartbeat.stop()


@dataclass
class CompactionRun:
    """A compaction being executed: its transaction (heartbeating in this process) and the
    work its tasks do (`compaction_task.compact_file_group` per slice, on threads here, on
    an engine's executors elsewhere)."""

    table: KeyedTable
    txn: _CompactionTxn
    work: CompactionWork
    anchor: int

    def abandon(self) -> None:
        """Stop heartbeating and leave the plan pending: the next run executes it again."""
        self.txn.detach()


def start(table: KeyedTable, t: str) -> CompactionRun | None:
    """Begin executing the scheduled compaction `t` (again, after a crash: its tasks write
    the same objects). None when it was already completed, or its plan no longer fits the
    table and was dropped; InstantNotFound when no such plan is pending."""
    table.refresh()
    for e in table.instants.log_entries:  # completed in the log, completed object not written yet
        if e.time == t and e.action == COMMIT:
            materialize(table.tl, e)
            return None
    if table.timeline(refresh=False).pending().get(t, COMPACTION) is None:
        if t in table.state(refresh=False).writes:
            return None  # completed, in the active timeline or archived: nothing to do
        raise InstantNotFound(f"no pending compaction {t} in {table.uri}")
    req = Instant(t, COMPACTION, State.REQUESTED)
    plan = decode_plan(table.tl.states.read(req), table.store.url(instant_key(req)))
    detail = plan[COMPACTION_DETAIL]
    anchor = int(detail["log_anchor_seq"])
    st = table.state(refresh=False)
    slices = _planned_slices(st, detail["operations"])
    if any(sl is None for sl in slices):
        _discard(table, t)
        return None
    with contextlib.suppress(Conflict):
        table.tl.states.create(Instant(t, COMPACTION, State.INFLIGHT), b"{}")
    crash.point(f"{COMPACTION}.inflight")
    # The plan was just checked against this state (`_planned_slices`: its base files current, its
    # logs live), so only completions after it are validated: a rollback or restore that left
    # the plan intact does not stop it. Completes as a commit.
    seen = max([anchor, *(e.seq for e in st.entries)])
    txn = _CompactionTxn(table, t, COMMIT, seen, COMPACT_OPERATION)
    codec = table.settings.parquet_compression_codec.arrow
    target = WriteTarget(t, table.settings.writer_id, math.inf, codec)
    schema = st.schema(anchor)
    work = CompactionWork(
        target,
        schema,
        table.settings.bloom_fpp(merge_on_read=True),
        tuple(s for s in slices if s),
        integer_key_column(table.properties, schema),
    )
    return CompactionRun(table, txn, work, anchor)


def complete(
    run: CompactionRun,
    written: Sequence[tuple[DataFile, Mapping[str, Any]]],
    extra_metadata: Mapping[str, str] | None = None,
) -> Instant | None:
    """Commit the new base files of every planned slice (what `compact_file_group` returned
    for each); None when another executor completed this plan first."""
    table, txn, t = run.table, run.txn, run.work.instant_time
    try:
        planned = {sl.group for sl in run.work.slices}
        got = {f.group for f, _ in written}
        if got != planned or len(written) != len(planned):
            raise TimelineError(
                f"compaction {t} of {table.uri}: base files for {sorted(got)}, "
                f"planned {sorted(planned)}"
            )
        order = {sl.group: i for i, sl in enumerate(run.work.slices)}
        written = sorted(written, key=lambda w: order[w[0].group])  # plan order, any engine
        for f, _ in written:
            txn.add(f)
        stats = [dict(stat) for _, stat in written]
        details = {
            WRITE_STATS: stats,
            COMPACTION_DETAIL: {"log_anchor_seq": run.anchor, "operations": len(planned)},
        }
        return txn.commit(extra_metadata, details)
    except CommitConflict as exc:
        if exc.winner == t:
            return None  # another executor completed this plan
        _discard(table, t)  # e.g. clustering or a rollback of a planned delta commit won
        raise
    finally:
        txn.detach()  # stop heartbeating: done, or left pending for the next run


def execute(table: KeyedTable, t: str) -> Instant | None:
    """Run a scheduled compaction in this process (again, after a crash: the same objects
    are written). None when it was already completed, or its plan no longer fits and was
    dropped."""
    run = start(table, t)
    if run is None:
        return None
    work = run.work
    try:
        writer = work.writer(table.store)
        logs = [lf for sl in work.slices for _, lf in sl.logs]
        # the plan's log objects, each fetched once for all its groups (not a ranged GET per
        # block) and decoded once, when they fit in memory beside the tasks (else each block
        # by its range, each object's head once); the groups run partition by partition (a
        # log object holds one partition's blocks), so the cache holds about one partition's
        # blocks at a time (`complete` restores the plan order)
        cache = LogCache(table.store, logs, whole=sum(lf.size for lf in logs) <= CACHED_LOGS)
        task = partial(compact_file_group, writer, work, cache=cache)
        by_partition = sorted(work.slices, key=lambda sl: sl.partition)
        with ThreadPoolExecutor(
            max(1, min(run.table.settings.write_parallelism, len(work.slices))),
            "flowledger-compact-group",
        ) as pool:
            written = list(pool.map(task, by_partition))
    except (NotFound, MissingTableObject) as exc:
        # A planned base or log is gone: the plan can never complete. Left pending it would
        # hold its file groups out of every later plan and stop archival; it is dropped.
        run.abandon()
        _discard(table, t)
        raise PlanError(
            f"compaction {t} of {table.uri} was dropped: an object its plan reads is missing "
            f"({exc})"
        ) from exc
    except BaseException:
        run.abandon()
        raise
    return complete(run, written)


def runnable(table: KeyedTable, *, only_abandoned: bool = True) -> list[str]:
    """Pending compactions to execute, oldest first: those only scheduled, and (with
    `only_abandoned`) inflight ones whose executor's heartbeat expired."""
    from ...heartbeat import expired

    out = []
    for i in pending(table):
        running = (
            only_abandoned
            and i.state is State.INFLIGHT
            and not expired(last_beat(table.store, i.time), table.settings.heartbeat_expiry_s)
        )
        if not running:
            out.append(i.time)
    return out


def pending(table: KeyedTable, *, refresh: bool = True) -> list[Instant]:
    """Compactions planned and not completed (requested or inflight)."""
    return list(table.timeline(refresh=refresh).pending().actions(COMPACTION))


def completed_compactions(st: TableState) -> list[str]:
    """Instant times of the live completed compactions, in completion order."""
    return [e.time for e in st.ordered_writes() if is_compaction(e)]


def run_pending(table: KeyedTable, *, only_abandoned: bool = True) -> list[str]:
    """Execute the `runnable` pending compactions, oldest first; returns their times."""
    ran = []
    for t in runnable(table, only_abandoned=only_abandoned):
        try:
            got = execute(table, t)
        except (CommitConflict, InstantNotFound):
            continue  # something that changed its file groups completed meanwhile: dropped
        if got is not None:
            ran.append(t)
    return ran


def compact(table: KeyedTable, *, force: bool = True) -> Instant | None:
    """Schedule (when `force` or the trigger fires) and execute one compaction."""
    t = schedule(table, force=force)
    return execute(table, t) if t is not None else None


def after_write(table: KeyedTable) -> None:
    """What a delta commit runs after completing, by `compaction_mode`: `inline` schedules
    and executes when the trigger fires, and executes plans whose executor died
    (`run_abandoned`); `async` executes on a thread of this process (`wait_async` joins
    it); `off` leaves it to `flowledger timeline compact`."""
    mode = table.settings.compaction_mode
    if mode == "off":
        return
    t = schedule(table)
    if mode == "inline":
        run_abandoned(table)
    if t is None:
        return
    if mode == "inline":
        execute(table, t)
        return
    thread = threading.Thread(
        target=_run_quietly, args=(table, t), name="flowledger-compaction", daemon=False
    )
    table.background.append(thread)
    thread.start()


def run_abandoned(table: KeyedTable) -> list[str]:
    """Execute the inflight compactions whose executor's heartbeat expired (it crashed or
    was killed), as Hudi's inline compaction runs pending ones: left pending, such a plan
    would keep its file groups out of every later plan and stop archival until someone
    ran `flowledger timeline compact`. Uses the view `schedule` just loaded. A plan that
    can never complete is dropped with a warning: the write that triggered this is done."""
    from ...heartbeat import expired

    ran = []
    expiry = table.settings.heartbeat_expiry_s
    for i in pending(table, refresh=False):
        if i.state is not State.INFLIGHT or not expired(last_beat(table.store, i.time), expiry):
            continue
        try:
            if execute(table, i.time) is not None:
                ran.append(i.time)
        except (CommitConflict, InstantNotFound):
            continue  # completed or dropped by another process meanwhile
        except PlanError as exc:
            log.warning("%s", exc)
    return ran


def _run_quietly(table: KeyedTable, t: str) -> None:
    with contextlib.suppress(Exception):  # left pending: the next run executes it again
        execute(table, t)


def wait_async(table: KeyedTable) -> None:
    threads, table.background = table.background, []
    for thread in threads:
        thread.join()


__all__ = [
    "NUM_AND_TIME",
    "NUM_COMMITS",
    "NUM_OR_TIME",
    "TIME_ELAPSED",
    "TRIGGERS",
    "CompactionRun",
    "Entry",
    "compact",
    "complete",
    "completed_compactions",
    "execute",
    "run_pending",
    "runnable",
    "schedule",
    "start",
    "wait_async",
]
