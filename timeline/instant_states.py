"""The instant-state store: one object per instant state, `_timeline/instants/<name>`.

Hudi's timeline folder. Names alone carry the time, action, state and (for completed
instants) the log position, so one paged LIST gives the whole active timeline. State objects
are created create-only and deleted newest state first, so a crash always leaves an earlier
state behind. Completed objects are materializations of commit-log entries (see
commit_log.py): the log, not this folder, decides whether an instant completed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from storage import ObjectStore

from .errors import InvalidInstant
from .instant import Instant, State, parse_name
from .layout import INSTANTS, instant_key, instant_prefix


class InstantStates:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def create(self, instant: Instant, body: bytes) -> None:
        """Create-only PUT of one state object (Conflict if it exists)."""
        self.store.put_if_absent(instant_key(instant), body)

    def read(self, instant: Instant) -> bytes:
        return self.store.get(instant_key(instant))

    def url(self, instant: Instant) -> str:
        return self.store.url(instant_key(instant))

    def delete(self, instants: Iterable[Instant]) -> None:
        for i in instants:  # newest state first, so a crash leaves an earlier state behind
            self.store.delete(instant_key(i))

    def list_states(self, prefix: str = INSTANTS) -> list[tuple[Instant, datetime | None]]:
        """Paged LIST: every state object under `prefix` with its last-modified time."""
        out = []
        for obj in self.store.list(prefix):
            try:
                out.append((parse_name(obj.key[len(INSTANTS) :]), obj.last_modified))
            except InvalidInstant:
                continue  # not ours (e.g. an editor's temp file)
        return out

    def of_time(self, time: str) -> list[Instant]:
        """The state objects of one instant time (a short LIST)."""
        return [i for i, _ in self.list_states(instant_prefix(time))]

    # -- raw state transitions (Hudi's HoodieActiveTimeline revert/delete operations) ----------
    def revert_to_inflight(self, instant: Instant) -> Instant:
        """Delete a completed state object: the instant is inflight again. Raw operation: a
        completion also recorded in the log is undone only by a logged rollback or restore."""
        if not instant.is_completed:
            raise InvalidInstant(f"{instant} is not completed")
        self.store.delete(instant_key(instant))
        return instant.with_state(State.INFLIGHT)

    def revert_inflight_to_requested(self, instant: Instant) -> Instant:
        if instant.state is not State.INFLIGHT:
            raise InvalidInstant(f"{instant} is not inflight")
        self.store.delete(instant_key(instant))
        return instant.with_state(State.REQUESTED)

    def delete_pending(self, instant: Instant) -> None:
        """Delete every pending state object of an instant (inflight first)."""
        if instant.is_completed:
            raise InvalidInstant(f"{instant} is completed, not pending")
        self.delete([instant.with_state(State.INFLIGHT), instant.with_state(State.REQUESTED)])


__all__ = ["InstantStates"]
