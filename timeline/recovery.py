"""Failed writes and interrupted table services: found from the instants listing.

LAZY (several writers): a pending write whose state objects and heartbeat were not touched
for the heartbeat expiry is rolled back. EAGER (single writer): every other pending write is.
A pending clean, rollback, restore or savepoint is finished from the plan in its first state
object (plans are idempotent), never half-undone. A pending compaction is never rolled back
(only rolled forward when it reached the log): its plan is executed again by
`table.maintenance.run_compaction` (keyed/compaction/service.py).
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import TYPE_CHECKING

from storage import Conflict

from .commit import materialize
from .errors import CommitConflict, TimelineError
from .heartbeat import expired, last_beat
from .instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
)
from .layout import instant_key
from .metadata import Entry, decode_plan
from .settings import EAGER
from .store import Listing
from .txn import Transaction

if TYPE_CHECKING:
    from .table_context import TableContext

SERVICES = (CLEAN, ROLLBACK, RESTORE, SAVEPOINT)
#: Set while this call stack recovers failed writes (each thread has its own context).
_RECOVERING: ContextVar[bool] = ContextVar("timeline_recovering", default=False)


def is_expired(table: TableContext, listing: Listing, inst: Instant) -> bool:
    expiry = table.settings.heartbeat_expiry_s
    touched = listing.touched.get((inst.time, inst.action))
    if touched is not None and not expired(touched, expiry):
        return False
    beat = last_beat(table.store, inst.time)
    latest = max((t for t in (touched, beat) if t is not None), default=None)
    return expired(latest, expiry)


def handle_failed_writes(table: TableContext, listing: Listing, exclude: str) -> list[str]:
    """Roll back failed writes and finish interrupted services; returns what was done."""
    if _RECOVERING.get():
        return []  # a rollback started from here begins an instant too: do not recurse
    token = _RECOVERING.set(True)
    try:
        done: list[str] = []
        eager = table.settings.failed_writes_cleaner_policy == EAGER
        failed = [
            i
            for i in listing.timeline.pending()
            if i.time != exclude
            and (
                (i.action in WRITE_ACTIONS and i.action != COMPACTION and eager)
                or (i.action in (*WRITE_ACTIONS, *SERVICES) and is_expired(table, listing, i))
            )
        ]
        if not failed:
            return done
        table.refresh()  # the log tells which of them completed before their writer died
        logged = {(e.time, e.action): e for e in table.instants.log_entries}
        completed = table.timeline(refresh=False).completed()
        for inst in failed:
            try:
                entry = logged.get((inst.time, inst.action))
                if entry is None and inst.action == COMPACTION:  # it completes as a commit
                    entry = logged.get((inst.time, COMMIT))
                if entry is not None:
                    materialize(table.tl, entry)  # roll forward: it did complete
                    done.append(f"completed {inst.time}.{inst.action}")
                elif completed.get(inst.time, inst.action) is not None:
                    continue  # completed since `listing` was made (a reused listing): done
                elif inst.action == COMPACTION:
                    continue  # never rolled back: its plan is executed again (keyed compaction)
                elif inst.action in WRITE_ACTIONS:
                    table.maintenance.rollback(inst.time)
                    done.append(f"rolled back {inst.time}.{inst.action}")
                else:
                    finish_service(table, inst)
                    done.append(f"finished {inst.time}.{inst.action}")
            except (CommitConflict, TimelineError):
                continue  # someone else got there first, or it completed meanwhile
        return done
    finally:
        _RECOVERING.reset(token)


def read_plan(table: TableContext, inst: Instant) -> dict[str, object]:
    first = State.INFLIGHT if inst.action == SAVEPOINT else State.REQUESTED
    state = Instant(inst.time, inst.action, first)
    return decode_plan(table.tl.states.read(state), table.store.url(instant_key(state)))


def finish_service(table: TableContext, inst: Instant) -> None:
    """Complete a pending service from its serialized plan (or materialize it if logged)."""
    table.refresh()
    for e in table.instants.log_entries:
        if e.time == inst.time and e.action == inst.action:
            materialize(table.tl, e)
            return
    plan = read_plan(table, inst)
    metadata = plan.get("metadata")
    if not isinstance(metadata, dict):
        raise TimelineError(f"pending {inst} has no plan to finish")
    if inst.state is State.REQUESTED:
        with contextlib.suppress(Conflict):  # exists already is fine
            table.tl.states.create(Instant(inst.time, inst.action, State.INFLIGHT), b"{}")
    base = int(str(plan.get("base", 0)))
    txn = Transaction(table, inst.time, inst.action, base, str(plan.get("operation", inst.action)))
    try:
        txn.complete(metadata)
    except CommitConflict as exc:
        if exc.winner != inst.time:
            raise


__all__ = ["Entry", "finish_service", "handle_failed_writes", "is_expired"]
