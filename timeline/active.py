"""The active timeline: an immutable, ordered view of instants with Hudi's filters and ranges.

One entry per instant, in its latest state. Built from names only (paged LIST), so loading
needs no GET per instant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from .instant import COMMIT, COMMIT_ACTIONS, COMPACTION, WRITE_ACTIONS, Instant, State


def latest_states(instants: Iterable[Instant]) -> list[Instant]:
    """Collapse the state objects of each instant to its most advanced state, sorted. A
    compaction completes as a `commit` of its instant time (Hudi's `t.compaction.requested`,
    `t.compaction.inflight`, `t.commit`): then it is that commit, no longer pending."""
    best: dict[tuple[str, str], Instant] = {}
    for i in instants:
        cur = best.get((i.time, i.action))
        if cur is None or i.state.rank > cur.state.rank:
            best[(i.time, i.action)] = i
    for (t, action), i in list(best.items()):
        if action == COMPACTION and i.is_pending:
            done = best.get((t, COMMIT))
            if done is not None and done.is_completed:
                del best[(t, action)]
    return sorted(best.values(), key=lambda i: i.sort_key)


class Timeline:
    """An ordered, filterable sequence of instants (Hudi's HoodieTimeline)."""

    def __init__(self, instants: Iterable[Instant]) -> None:
        self._instants: tuple[Instant, ...] = tuple(sorted(instants, key=lambda i: i.sort_key))

    @classmethod
    def of_sorted(cls, instants: Iterable[Instant]) -> Timeline:
        """A timeline of instants already in `sort_key` order, one per (time, action): no
        re-sort (filters of a timeline; archive files, written time-ordered)."""
        t = cls.__new__(cls)
        t._instants = tuple(instants)
        return t

    # -- basics ---------------------------------------------------------------------------------
    @property
    def instants(self) -> tuple[Instant, ...]:
        return self._instants

    def __iter__(self) -> Iterator[Instant]:
        return iter(self._instants)

    def __len__(self) -> int:
        return len(self._instants)

    def __repr__(self) -> str:
        return f"Timeline({[str(i) for i in self._instants]})"

    def empty(self) -> bool:
        return not self._instants

    def times(self) -> list[str]:
        return [i.time for i in self._instants]

    def first(self) -> Instant | None:
        return self._instants[0] if self._instants else None

    def last(self) -> Instant | None:
        return self._instants[-1] if self._instants else None

    def nth(self, n: int) -> Instant | None:
        return self._instants[n] if 0 <= n < len(self._instants) else None

    def nth_from_last(self, n: int) -> Instant | None:
        """0 = the last instant (Hudi's nthFromLastInstant)."""
        return self.nth(len(self._instants) - 1 - n)

    def get(self, time: str, action: str | None = None) -> Instant | None:
        for i in self._instants:
            if i.time == time and (action is None or i.action == action):
                return i
        return None

    def contains(self, time: str) -> bool:
        return self.get(time) is not None

    def is_before_timeline_starts(self, time: str) -> bool:
        first = self.first()
        return first is not None and time < first.time

    # -- filters --------------------------------------------------------------------------------
    def filter(self, pred: Callable[[Instant], bool]) -> Timeline:
        return Timeline.of_sorted(i for i in self._instants if pred(i))

    def completed(self) -> Timeline:
        return self.filter(lambda i: i.is_completed)

    def pending(self) -> Timeline:
        return self.filter(lambda i: i.is_pending)

    def pending_excluding_compaction(self) -> Timeline:
        return self.filter(lambda i: i.is_pending and i.action != COMPACTION)

    def requested(self) -> Timeline:
        return self.filter(lambda i: i.state is State.REQUESTED)

    def inflight(self) -> Timeline:
        return self.filter(lambda i: i.state is State.INFLIGHT)

    def actions(self, *actions: str) -> Timeline:
        wanted = set(actions)
        return self.filter(lambda i: i.action in wanted)

    def commits(self) -> Timeline:
        """commit + deltacommit + replacecommit (Hudi's getCommitsTimeline)."""
        return self.filter(lambda i: i.action in COMMIT_ACTIONS)

    def write_timeline(self) -> Timeline:
        """The commits timeline plus compaction (Hudi's getWriteTimeline)."""
        return self.filter(lambda i: i.action in WRITE_ACTIONS)

    def by_completion(self) -> list[Instant]:
        """Completed instants in completion (commit-log) order."""
        return sorted((i for i in self._instants if i.is_completed), key=lambda i: i.seq or 0)

    # -- ranges (on instant time) ----------------------------------------------------------------
    def in_range(self, start: str, end: str) -> Timeline:
        """Instants with start < time <= end (Hudi's findInstantsInRange)."""
        return self.filter(lambda i: start < i.time <= end)

    def in_closed_range(self, start: str, end: str) -> Timeline:
        return self.filter(lambda i: start <= i.time <= end)

    def after(self, time: str, n: int | None = None) -> Timeline:
        """The first `n` instants strictly after `time` (Hudi's findInstantsAfter)."""
        later = [i for i in self._instants if i.time > time]
        return Timeline(later if n is None else later[:n])

    def after_or_equal(self, time: str) -> Timeline:
        return self.filter(lambda i: i.time >= time)

    def before(self, time: str) -> Timeline:
        """Instants strictly before `time` (Hudi's findInstantsBefore)."""
        return self.filter(lambda i: i.time < time)

    def before_or_equal(self, time: str) -> Timeline:
        return self.filter(lambda i: i.time <= time)
