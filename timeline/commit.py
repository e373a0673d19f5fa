"""Completing an instant: validate against newer completions, take the next log position,
then materialize (side effects of table services, then the completed instant object).

The log position `_timeline/log/<seq>` is the single serialization point: a create-only PUT
on a key that does not depend on the instant, so two completions can never share a position
and every completion validates against all positions taken after the state it planned on.
A lost position costs one GET (its winner's entry, needed for validation anyway) before the
next one is tried; after a few lost positions in a row the log is LISTed to catch up.
Loading finds completions whose completed object is missing from holes in the completed
objects' positions (see loader.py). The log's guarantees are in commit_log.py.
"""

from __future__ import annotations

from storage import NotFound, ObjectStore

from . import crash
from .commit_log import CommitLog
from .conflicts import conflict
from .errors import CommitConflict, TimelineError
from .instant import CLEAN, COMMIT, COMPACT_OPERATION, COMPACTION, RESTORE, ROLLBACK, parse_name
from .layout import data_prefix, heartbeat_key, instant_key
from .metadata import Entry
from .store import TimelineStore


def complete(
    log: CommitLog, intent: Entry, base: int, known_latest: int, max_attempts: int
) -> Entry:
    """Take a log position for `intent`; raises CommitConflict naming the winner."""
    checked = base
    target = max(base, known_latest) + 1
    for attempt in range(max_attempts):
        for s in range(checked + 1, target):
            try:
                theirs = log.entry(s)
            except NotFound as exc:
                raise TimelineError(
                    f"commit log position {s} is missing (archived while this write ran?); "
                    f"instant {intent.time} did not complete, retry it"
                ) from exc
            reason = conflict(intent, theirs)
            if reason:
                raise CommitConflict(
                    f"instant {intent.time} ({intent.action}) conflicts with {theirs.action} "
                    f"{theirs.time}, which completed first: {reason}",
                    theirs.time,
                    theirs.action,
                )
        checked = target - 1
        completion_point(intent.action, intent.metadata.get("operation"), "before_log")
        entry = intent.with_seq(target)
        if log.take(entry):
            completion_point(intent.action, intent.metadata.get("operation"), "logged")
            return entry
        if attempt % 3 == 2:  # far behind: one LIST instead of walking position by position
            newer = log.after(target)
            target = max(newer, default=target) + 1
        else:
            target += 1
    raise CommitConflict(
        f"instant {intent.time} gave up after {max_attempts} attempts to take a log position",
    )


def completion_point(action: str, operation: object, step: str) -> None:
    """The crash point `<action>.<step>` of a completion; a compaction completes as a
    commit, so its steps are also `compaction.<step>`."""
    crash.point(f"{action}.{step}")
    if action == COMMIT and operation == COMPACT_OPERATION:
        crash.point(f"{COMPACTION}.{step}")


def _delete_prefix(store: ObjectStore, prefix: str) -> list[str]:
    keys = [o.key for o in store.list(prefix)]
    store.delete_many(keys)
    return keys


def _delete_pending_states(tl: TimelineStore, time: str, action: str) -> None:
    states = [i for i in tl.states.of_time(time) if i.action == action and i.is_pending]
    tl.states.delete(sorted(states, key=lambda i: -i.state.rank))


def materialize(tl: TimelineStore, e: Entry) -> None:
    """Carry out a logged completion. Idempotent: the writer or any helper may run it."""
    store = tl.store
    if e.action == CLEAN:
        store.delete_many(e.deleted)
        crash.point("clean.deleted")
    elif e.action == ROLLBACK and e.metadata.get("target_state") == "pending":
        # Validation proved the target has no completion before this one, and the target
        # validates against this one before completing: it never completes.
        target, action = e.target, str(e.metadata.get("target_action", ""))
        store.delete_many(e.deleted)
        _delete_prefix(store, data_prefix(target))
        crash.point("rollback.deleted")
        store.delete(heartbeat_key(target))
        _delete_pending_states(tl, target, action)
    elif e.action in (ROLLBACK, RESTORE):
        store.delete_many(e.deleted)
        crash.point(f"{e.action}.deleted")
        for name in e.rolled_back:  # newest first (the plan's order)
            gone = parse_name(name)
            store.delete(instant_key(gone))
            _delete_pending_states(tl, gone.time, gone.action)
            if gone.action == COMMIT:  # a compaction's plan completes as a commit
                _delete_pending_states(tl, gone.time, COMPACTION)
            crash.point(f"{e.action}.undone")  # some later commits undone, not all
    tl.write_completed(e)
