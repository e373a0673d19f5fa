"""Splitting a merge-on-read base by its slice's log keys (keyed/read/split.py): the rows no
log entry names and the rows some entry names, each in base order, exactly the rows a test of
every base key against every log key finds, whether the base's keys ascend (a binary search of
the log keys) or not (hashing), integer keys or text; a row group no entry names is passed on
as it is, without a copy."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timeline.keyed.keys import RECORD_KEY_COL
from timeline.keyed.log import DELETE, OP_COL, UPSERT
from timeline.keyed.read.split import named_rows, split_named

BASE = pa.schema([(RECORD_KEY_COL, pa.string()), ("id", pa.int64()), ("v", pa.string())])


def _base(groups: list[list[int]]) -> pa.Table:
    """A base of one chunk (a decoded row group) per list of keys."""
    return pa.concat_tables(
        pa.table(
            {
                RECORD_KEY_COL: [str(k) for k in keys],
                "id": pa.array(keys, pa.int64()),
                "v": [f"v{k}" for k in keys],
            },
            schema=BASE,
        )
        for keys in groups
    )


def _log(ids: list[int | None], keys: list[str], ops: list[str]) -> pa.Table:
    return pa.table(
        {
            RECORD_KEY_COL: pa.array(keys, pa.string()),
            "id": pa.array(ids, pa.int64()),
            OP_COL: pa.array(ops, pa.string()),
        }
    )


def _upserts(ids: list[int]) -> pa.Table:
    return _log(list(ids), [str(i) for i in ids], [UPSERT] * len(ids))


def _expected(base: pa.Table, logs: list[pa.Table]) -> tuple[pa.Table, pa.Table]:
    """The split as a plain model makes it: a base row is named when its key text is the
    key text of some entry."""
    named = {k for lg in logs for k in lg.column(RECORD_KEY_COL).to_pylist()}
    mask = pa.array([k in named for k in base.column(RECORD_KEY_COL).to_pylist()], pa.bool_())
    return base.filter(pc.invert(mask)), base.filter(mask)


def _buffers(t: pa.Table, chunk: int) -> list[int]:
    return [
        b.address
        for c in t.columns
        for b in c.chunk(chunk).buffers()
        if b is not None  # the validity bitmap of a column without nulls
    ]


@pytest.mark.unit
def test_a_row_group_no_entry_names_is_passed_on_unchanged() -> None:
    base = _base([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    rest, named = split_named(base, [_upserts([5])], "id")
    assert rest.column("id").to_pylist() == [1, 2, 3, 4, 6, 7, 8, 9]
    assert named.column("v").to_pylist() == ["v5"]
    # the first and last row groups are the base's own memory, not copies
    assert _buffers(rest, 0) == _buffers(base, 0)
    assert _buffers(rest, rest.column(0).num_chunks - 1) == _buffers(base, 2)


@pytest.mark.unit
def test_a_base_losing_rows_in_two_row_groups_reads_the_rows_it_did() -> None:
    base = _base([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    logs = [_upserts([2, 9, 20]), _log([None], ["8"], [DELETE]), _upserts([2])]
    rest, named = split_named(base, logs, "id")
    want_rest, want_named = _expected(base, logs)
    assert rest.equals(want_rest) and named.equals(want_named)
    assert named.column("id").to_pylist() == [2, 8, 9]


@pytest.mark.unit
def test_named_rows_are_found_ascending_once_each_whatever_the_key_order() -> None:
    logs = [_upserts([9, 3, 3, -1, 100]), _upserts([3])]
    ascending = _base([[1, 3, 5, 9]])
    shuffled = _base([[9, 1, 5, 3]])
    assert named_rows(ascending, logs, "id").tolist() == [1, 3]  # type: ignore[union-attr]
    assert named_rows(shuffled, logs, "id").tolist() == [0, 3]  # type: ignore[union-attr]
    assert named_rows(ascending, [_upserts([])], "id") is None


groups_st = st.lists(st.lists(st.integers(-5, 30), max_size=6), min_size=1, max_size=4)
entries_st = st.lists(
    st.tuples(st.sampled_from([UPSERT, DELETE]), st.integers(-8, 34), st.booleans()), max_size=8
)


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    groups=groups_st,
    blocks=st.lists(entries_st, max_size=3),
    ascending=st.booleans(),
    as_numbers=st.booleans(),
)
def test_the_split_equals_a_test_of_every_key(
    groups: list[list[int]],
    blocks: list[list[tuple[str, int, bool]]],
    ascending: bool,
    as_numbers: bool,
) -> None:
    """Random bases (one key once, in row groups, ascending or not) and blocks (deletes with
    or without their number, keys repeated within and across blocks, keys outside the base)."""
    seen: set[int] = set()
    keys = [[k for k in g if not (k in seen or seen.add(k))] for g in groups]  # type: ignore[func-returns-value]
    if ascending:
        flat = sorted(k for g in keys for k in g)
        sizes = [len(g) for g in keys]
        keys = [flat[sum(sizes[:i]) : sum(sizes[: i + 1])] for i in range(len(sizes))]
    base = _base(keys)
    logs = [
        _log(
            [k if op == UPSERT or numbered else None for op, k, numbered in b],
            [str(k) for _, k, _ in b],
            [op for op, _, _ in b],
        )
        for b in blocks
    ]
    rest, named = split_named(base, logs, "id" if as_numbers else None)
    want_rest, want_named = _expected(base, logs)
    assert rest.equals(want_rest)
    assert named.equals(want_named)


@pytest.mark.unit
def test_a_delete_by_key_text_is_found_by_its_number_without_hashing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def hashing(*_: object) -> None:
        raise AssertionError("integer keys ascending in their base are searched, not hashed")

    monkeypatch.setattr("timeline.keyed.read.split.named_mask", hashing)
    base = _base([[1, 2, 3], [4, 5]])
    logs = [_log([None, 4], ["2", "4"], [DELETE, UPSERT]), _log([None], ["7"], [DELETE])]
    assert named_rows(base, logs, "id").tolist() == [1, 3]  # type: ignore[union-attr]
