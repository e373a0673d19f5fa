"""Instants: (instant time, action, state), their object names and their order.

An instant time is `yyyyMMddHHmmssSSS` in UTC. Object names (relative to `_timeline/instants/`):

    <time>.<action>.requested
    <time>.<action>.inflight
    <time>.<action>.completed.<seq:020d>     (seq = position in the commit log = completion order)

`parse_name(format_name(i)) == i` for every action and state. Instants order by instant time,
then action, then state (requested < inflight < completed); completion order is `seq`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import Enum
from types import MappingProxyType

from .errors import InvalidInstant

TIME_FORMAT = "%Y%m%d%H%M%S%f"  # %f gives microseconds: cut to milliseconds
TIME_LEN = 17
SEQ_WIDTH = 20
_TIME_RE = re.compile(r"^\d{17}$")


class State(Enum):
    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = MappingProxyType({State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2})

COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
COMPACTION = "compaction"
CLEAN = "clean"
ROLLBACK = "rollback"
SAVEPOINT = "savepoint"
RESTORE = "restore"
INDEXING = "indexing"

ACTIONS = (
    COMMIT,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    COMPACTION,
    CLEAN,
    ROLLBACK,
    SAVEPOINT,
    RESTORE,
    INDEXING,
)
#: Actions that add or replace data files (Hudi's "commits timeline").
COMMIT_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
#: The write timeline adds compaction (Hudi's getWriteTimeline also adds clustering/logcompaction).
WRITE_ACTIONS = frozenset({*COMMIT_ACTIONS, COMPACTION})
#: Completed action -> the action its plan's pending states carry, where the two differ: a
#: compaction is planned as `<t>.compaction.requested` / `.inflight` and completes as
#: `<t>.commit` (Hudi). Whatever ends, rolls back or archives an instant ends both names.
PLANNED_AS = MappingProxyType({COMMIT: COMPACTION})
#: The commit-metadata operation of a completed compaction.
COMPACT_OPERATION = "compact"
#: The inverse: a pending action -> the action it completes as.
COMPLETES_AS = MappingProxyType({v: k for k, v in PLANNED_AS.items()})


def pending_actions(action: str) -> tuple[str, ...]:
    """The actions whose pending state objects an instant completed as `action` may have."""
    planned = PLANNED_AS.get(action)
    return (action,) if planned is None else (action, planned)


@dataclass(frozen=True, order=False)
class Instant:
    time: str
    action: str
    state: State
    #: Completion order (the commit-log position); set exactly when state is COMPLETED.
    seq: int | None = None

    def __post_init__(self) -> None:
        validate_time(self.time)
        if self.action not in ACTIONS:
            raise InvalidInstant(f"unknown action {self.action!r} (one of {', '.join(ACTIONS)})")
        if (self.state is State.COMPLETED) != (self.seq is not None):
            raise InvalidInstant(f"instant {self.time}.{self.action}: seq iff completed")

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state is not State.COMPLETED

    @property
    def sort_key(self) -> tuple[str, str, int]:
        return (self.time, self.action, self.state.rank)

    def with_state(self, state: State, seq: int | None = None) -> Instant:
        return replace(self, state=state, seq=seq)

    @property
    def name(self) -> str:
        return format_name(self)

    def __str__(self) -> str:
        return format_name(self)


def validate_time(t: str) -> str:
    if not isinstance(t, str) or not _TIME_RE.match(t):
        raise InvalidInstant(f"invalid instant time {t!r}: expected yyyyMMddHHmmssSSS (17 digits)")
    try:
        parse_time(t)
    except ValueError as exc:
        raise InvalidInstant(f"invalid instant time {t!r}: {exc}") from exc
    return t


def parse_time(t: str) -> datetime:
    return datetime.strptime(t + "000", TIME_FORMAT).replace(tzinfo=UTC)


def format_time(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime(TIME_FORMAT)[:TIME_LEN]


def next_time(t: str) -> str:
    """The instant time one millisecond after `t`."""
    return format_time(parse_time(t) + timedelta(milliseconds=1))


def format_name(i: Instant) -> str:
    if i.state is State.COMPLETED:
        return f"{i.time}.{i.action}.completed.{i.seq:0{SEQ_WIDTH}d}"
    return f"{i.time}.{i.action}.{i.state.value}"


def parse_name(name: str) -> Instant:
    parts = name.split(".")
    try:
        if len(parts) == 4 and parts[2] == "completed":
            if not parts[3].isdigit() or len(parts[3]) != SEQ_WIDTH:
                raise InvalidInstant(f"bad completion sequence in {name!r}")
            return Instant(parts[0], parts[1], State.COMPLETED, int(parts[3]))
        if len(parts) == 3 and parts[2] in ("requested", "inflight"):
            return Instant(parts[0], parts[1], State(parts[2]))
    except InvalidInstant as exc:
        raise InvalidInstant(f"invalid timeline object name {name!r}: {exc}") from exc
    raise InvalidInstant(f"invalid timeline object name {name!r}")


class InstantTimeGenerator:
    """Proposes instant times: now (UTC, ms), never repeating one this process proposed.

    Uniqueness across writers comes from the create-only `requested` object: on a collision
    the caller asks `after(t)` for the next free time instead of sleeping out clock skew.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = ""

    def new(self) -> str:
        with self._lock:
            t = format_time(datetime.now(UTC))
            if t <= self._last:
                t = next_time(self._last)
            self._last = t
            return t

    def after(self, t: str) -> str:
        with self._lock:
            n = next_time(max(t, self._last))
            self._last = n
            return n


#: The forms `parse_as_of` accepts, as every message about a refused one lists them.
AS_OF_FORMS = (
    "an instant time (yyyyMMddHHmmssSSS), yyyyMMddHHmmss or an ISO 8601 time such as "
    "2024-01-31T12:00:00Z or 2024-01-31"
)


def parse_as_of(text: str, name: str = "as_of") -> str:
    """A point in time as an instant time: yyyyMMddHHmmssSSS, yyyyMMddHHmmss or ISO 8601
    (Hudi's `as.of.instant` forms; a naive ISO time is UTC). `name`: what the caller calls
    the value (`as_of`, `begin`, `--changes-since`), so that a refusal names it."""
    t = text.strip()
    if t.isdigit() and len(t) in (14, TIME_LEN):
        full = t.ljust(TIME_LEN, "0")
        try:
            parse_time(full)
        except ValueError:  # digits that are no date, e.g. month 13
            raise InvalidInstant(
                f"invalid {name} {text!r}: not a date and time; expected {AS_OF_FORMS}"
            ) from None
        return full
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise InvalidInstant(f"invalid {name} {text!r}: expected {AS_OF_FORMS}") from None
    return format_time(dt if dt.tzinfo else dt.replace(tzinfo=UTC))
