"""A base's named rows are handed to the merge only when one of them may survive it
(keyed/read/split.py `may_survive`): when every entry of the slice beats every named row, the
split leaves them out and the merged rows are the same, row for row, as with them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.keyed.keys import RECORD_KEY_COL
from timeline.keyed.log import DELETE, OP_COL, UPSERT
from timeline.keyed.read.merge import UNCONDITIONAL, Rule, concat, merge
from timeline.keyed.read.split import split_named

EVENT_TIME = Rule("ts", ordered_deletes=True)
BY_KEY_DELETES = Rule("ts", ordered_deletes=False)


INT = pa.int64()


def _base(keys: list[int], ts: Sequence[float | None], typ: pa.DataType = INT) -> pa.Table:
    return pa.table(
        {
            RECORD_KEY_COL: [str(k) for k in keys],
            "id": pa.array(keys, pa.int64()),
            "ts": pa.array(ts, typ),
            "v": [f"base{k}" for k in keys],
        }
    )


def _log(entries: Sequence[tuple[str, int, float | None]], typ: pa.DataType = INT) -> pa.Table:
    return pa.table(
        {
            RECORD_KEY_COL: [str(k) for _, k, _ in entries],
            "id": pa.array([k for _, k, _ in entries], pa.int64()),
            "ts": pa.array([t for _, _, t in entries], typ),
            "v": [f"log{k}@{t}" for _, k, t in entries],
            OP_COL: [op for op, _, _ in entries],
        }
    )


def _read(base: pa.Table, logs: list[pa.Table], rules: list[Rule], skip: bool) -> pa.Table:
    """The slice as the reader makes it: rows no log names, then the merge of the rest."""
    rest, named = split_named(base, logs, "id", rules if skip else None)
    return concat([rest, merge(named, logs, rules, key_col="id")])


@pytest.mark.unit
def test_rows_superseded_by_newer_entries_are_left_out_and_the_rows_read_are_the_same() -> None:
    base = _base([1, 2, 3, 4], [10, 10, 10, 10])
    logs = [_log([(UPSERT, 2, 11), (UPSERT, 9, 11)]), _log([(DELETE, 3, 12), (UPSERT, 2, 13)])]
    rules = [EVENT_TIME, EVENT_TIME]
    rest, named = split_named(base, logs, "id", rules)
    assert named.num_rows == 0 and named.schema == base.schema
    assert rest.column("id").to_pylist() == [1, 4]
    got = _read(base, logs, rules, skip=True)
    assert got.equals(_read(base, logs, rules, skip=False))
    assert got.column("v").to_pylist() == ["base1", "base4", "log9@11", "log2@13"]


@pytest.mark.unit
def test_an_older_entry_hands_the_named_rows_over_and_the_stored_row_survives() -> None:
    base = _base([1, 2, 3], [10, 20, 10])
    logs = [_log([(UPSERT, 2, 15), (UPSERT, 3, 30)])]
    named = split_named(base, logs, "id", [EVENT_TIME])[1]
    assert named.column("id").to_pylist() == [2, 3]
    got = _read(base, logs, [EVENT_TIME], skip=True)
    assert got.column("v").to_pylist() == ["base1", "base2", "log3@30"]


@pytest.mark.unit
def test_unconditional_entries_and_deletes_by_key_always_beat_the_stored_row() -> None:
    base = _base([1, 2, 3], [50, 50, 50])
    commit_time = [_log([(UPSERT, 1, 1), (DELETE, 2, None)])]
    assert split_named(base, commit_time, "id", [UNCONDITIONAL])[1].num_rows == 0
    # a delete by key alone under event_time applies whatever its value; upserts compare
    by_key = [_log([(DELETE, 2, 1), (UPSERT, 3, 60)])]
    assert split_named(base, by_key, "id", [BY_KEY_DELETES])[1].num_rows == 0
    assert split_named(base, by_key, "id", [EVENT_TIME])[1].num_rows == 2


@pytest.mark.unit
@pytest.mark.parametrize(
    "stored, incoming",
    [([10.0, math.nan], [20.0]), ([10.0], [math.nan]), ([10.0], [None])],
    ids=["nan stored", "nan entry", "null entry"],
)
def test_values_that_compare_as_nothing_hand_the_named_rows_over(
    stored: list[float], incoming: list[float | None]
) -> None:
    keys = list(range(1, len(stored) + 1))
    base = _base(keys, list(stored), pa.float64())
    logs = [_log([(UPSERT, k, incoming[0]) for k in keys], pa.float64())]
    assert split_named(base, logs, "id", [EVENT_TIME])[1].num_rows == len(keys)
    got, want = _read(base, logs, [EVENT_TIME], True), _read(base, logs, [EVENT_TIME], False)
    assert repr(got.to_pydict()) == repr(want.to_pydict())  # (NaN is not equal to itself)


_TS = st.one_of(st.none(), st.integers(0, 6))


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(
    stored=st.lists(_TS, min_size=1, max_size=8),
    blocks=st.lists(
        st.tuples(
            st.lists(st.tuples(st.sampled_from([UPSERT, DELETE]), st.integers(0, 10), _TS)),
            st.sampled_from([EVENT_TIME, BY_KEY_DELETES, UNCONDITIONAL]),
        ),
        max_size=4,
    ),
)
def test_the_rows_read_are_the_same_with_or_without_the_named_rows_left_out(
    stored: list[int | None], blocks: list[tuple[list[tuple[str, int, int | None]], Rule]]
) -> None:
    base = _base(list(range(len(stored))), stored)
    logs = [_log(entries) for entries, _ in blocks]
    rules = [r for _, r in blocks]
    assert _read(base, logs, rules, skip=True).equals(_read(base, logs, rules, skip=False))
