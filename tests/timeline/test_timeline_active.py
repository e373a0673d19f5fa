"""Instants, names and the active timeline (mirrors Hudi's TestHoodieActiveTimeline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import open_store
from timeline import (
    ACTIONS,
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    Instant,
    InstantTimeGenerator,
    InvalidInstant,
    State,
    Timeline,
    format_name,
    parse_name,
)
from timeline.instant import next_time
from timeline.store import TimelineStore

pytestmark = pytest.mark.unit


def _t(n: str) -> str:
    """A 17-digit instant time ending in `n` (Hudi's tests use "01", "03", ...)."""
    return "20260101000000" + n.rjust(3, "0")


def _inst(n: str, action: str = COMMIT, state: State = State.COMPLETED, seq: int = 0) -> Instant:
    return Instant(_t(n), action, state, (seq or int(n)) if state is State.COMPLETED else None)


def test_names_round_trip_for_every_action_and_state() -> None:
    for action in ACTIONS:
        for state in State:
            i = Instant(_t("7"), action, state, 42 if state is State.COMPLETED else None)
            assert parse_name(format_name(i)) == i
            assert format_name(parse_name(format_name(i))) == format_name(i)
    assert format_name(_inst("5")) == "20260101000000005.commit.completed.00000000000000000005"
    assert format_name(_inst("5", state=State.REQUESTED)) == "20260101000000005.commit.requested"


@pytest.mark.parametrize(
    "bad",
    [
        "2026010100000000.commit.requested",  # 16 digits
        "20261301000000000.commit.requested",  # month 13
        "20260101000000000.bogus.requested",
        "20260101000000000.commit.done",
        "20260101000000000.commit.completed.12",
        "20260101000000000.commit",
    ],
)
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInstant):
        parse_name(bad)


def test_time_generator_is_unique_and_moves_on_collision() -> None:
    gen = InstantTimeGenerator()
    times = [gen.new() for _ in range(500)]
    assert len(set(times)) == 500 and times == sorted(times)
    assert all(len(t) == 17 for t in times)
    assert gen.after(times[-1]) > times[-1]
    assert next_time("20261231235959999") == "20270101000000000"


def test_ordering_rules() -> None:
    a = _inst("1", state=State.REQUESTED)
    b = _inst("1", state=State.INFLIGHT)
    c = _inst("1")
    d = _inst("2", state=State.REQUESTED)
    assert sorted([d, c, b, a], key=lambda i: i.sort_key) == [a, b, c, d]
    assert [i.state for i in sorted([d, c, b, a], key=lambda i: i.sort_key)] == [
        State.REQUESTED,
        State.INFLIGHT,
        State.COMPLETED,
        State.REQUESTED,
    ]


def test_empty_timeline() -> None:
    tl = Timeline([])
    assert tl.empty() and len(tl) == 0
    assert tl.first() is None and tl.last() is None and tl.nth_from_last(0) is None
    assert tl.completed().empty() and tl.pending().empty()
    assert tl.in_range("01", "99").empty() and tl.after("0").empty()


def _mock_timeline() -> Timeline:
    """Hudi's MockHoodieTimeline: commits 01..19 completed, 21 and 23 inflight."""
    done = [_inst(n) for n in ("01", "03", "05", "07", "09", "11", "13", "15", "17", "19")]
    pending = [_inst(n, state=State.INFLIGHT) for n in ("21", "23")]
    return Timeline(done + pending)


def test_range_semantics() -> None:
    tl = _mock_timeline().commits().completed()
    assert tl.in_range(_t("04"), _t("11")).times() == [_t(n) for n in ("05", "07", "09", "11")]
    assert tl.after(_t("07"), 2).times() == [_t("09"), _t("11")]
    assert tl.before(_t("07")).times() == [_t("01"), _t("03"), _t("05")]
    assert tl.in_range(_t("01"), _t("01")).empty()  # start-exclusive
    assert tl.in_closed_range(_t("01"), _t("03")).times() == [_t("01"), _t("03")]


def test_timeline_operations() -> None:
    tl = _mock_timeline()
    assert not tl.empty()
    assert not tl.commits().pending_excluding_compaction().empty()
    assert len(tl) == 12
    active = tl.commits().completed()
    assert len(active) == 10
    assert active.first() is not None and active.first().time == _t("01")  # type: ignore[union-attr]
    assert active.nth(5).time == _t("11")  # type: ignore[union-attr]
    assert active.last().time == _t("19")  # type: ignore[union-attr]
    assert active.nth_from_last(5).time == _t("09")  # type: ignore[union-attr]
    assert active.contains(_t("09"))
    assert not active.is_before_timeline_starts(_t("02"))
    assert active.is_before_timeline_starts(_t("00"))


def test_sub_timelines() -> None:
    instants = [
        _inst("1", COMMIT),
        _inst("2", DELTA_COMMIT),
        _inst("3", REPLACE_COMMIT),
        _inst("4", COMPACTION, State.REQUESTED),
        _inst("5", CLEAN),
        _inst("6", "rollback"),
        _inst("7", "savepoint"),
        _inst("8", "restore", State.INFLIGHT),
        _inst("9", COMMIT, State.INFLIGHT),
    ]
    tl = Timeline(instants)
    assert tl.commits().times() == [_t(n) for n in ("1", "2", "3", "9")]
    assert tl.write_timeline().times() == [_t(n) for n in ("1", "2", "3", "4", "9")]
    assert tl.actions(CLEAN).times() == [_t("5")]
    assert tl.pending().times() == [_t("4"), _t("8"), _t("9")]
    assert tl.pending_excluding_compaction().times() == [_t("8"), _t("9")]
    assert tl.requested().times() == [_t("4")]
    assert tl.inflight().times() == [_t("8"), _t("9")]
    assert [i.seq for i in tl.by_completion()] == [1, 2, 3, 5, 6, 7]


def test_lifecycle_with_reload_revert_and_delete(tmp_path: Path) -> None:
    """Create instants, move them through states, reload from a LIST, revert, delete."""
    store = open_store("file://" + str(tmp_path))
    tl = TimelineStore(store)
    ones = [Instant(_t(n), COMMIT, State.REQUESTED) for n in ("1", "3", "5", "7", "9")]
    for k, i in enumerate(ones):
        tl.states.create(i, b"{}")
        if k < 4:
            tl.states.create(i.with_state(State.INFLIGHT), b"{}")
        if k < 3:
            tl.states.create(i.with_state(State.COMPLETED, k + 1), b"{}")
    loaded = tl.list_instants()
    assert len(loaded.timeline) == 5
    assert [i.state for i in loaded.timeline] == [State.COMPLETED] * 3 + [
        State.INFLIGHT,
        State.REQUESTED,
    ]
    assert loaded.timeline.commits().completed().times() == [_t("1"), _t("3"), _t("5")]
    assert loaded.timeline.commits().pending_excluding_compaction().times() == [_t("7"), _t("9")]
    assert loaded.max_seq == 3

    # revert: completed -> inflight -> requested, then delete the pending instant
    completed5 = loaded.timeline.get(_t("5"))
    assert completed5 is not None
    back = tl.states.revert_to_inflight(completed5)
    assert tl.list_instants().timeline.get(_t("5")) == back
    requested = tl.states.revert_inflight_to_requested(back)
    assert tl.list_instants().timeline.get(_t("5")) == requested
    tl.states.delete_pending(requested)
    assert tl.list_instants().timeline.get(_t("5")) is None
    with pytest.raises(InvalidInstant):
        tl.states.delete_pending(completed5)
    # the listing needs no GET: one LIST for the whole folder
    store.stats.reset()
    tl.list_instants()
    assert store.stats.snapshot() == {"LIST": 1}
