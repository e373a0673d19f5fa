"""The reader's merge (keyed/read/merge.py) against a plain model of it: random slices (bases in
several chunks, the same key in several slices, blocks under either rule, deletes that carry
only the record key text, null ordering values), merged matching keys as numbers (a single
integer record key) and as text; both equal the model, row for row and in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.timeline.keyed.test_mor_tables import OFF, _rows, _table, _values
from timeline.keyed.keys import RECORD_KEY_COL
from timeline.keyed.log.block import DELETE, OP_COL, UPSERT
from timeline.keyed.read.merge import UNCONDITIONAL, Rule, merge, merge_slices

SCHEMA = pa.schema([("id", pa.int64()), (RECORD_KEY_COL, pa.string()), ("ts", pa.int64())])
LOG_SCHEMA = SCHEMA.append(pa.field("v", pa.string())).append(pa.field(OP_COL, pa.string()))

keys_st = st.integers(-3, 12)  # few keys: repeats within and across slices are common
ts_st = st.one_of(st.none(), st.integers(0, 3))  # ties and nulls are common
entry_st = st.tuples(st.sampled_from([UPSERT, UPSERT, DELETE]), keys_st, ts_st)
rule_st = st.sampled_from([UNCONDITIONAL, Rule("ts", False), Rule("ts", True)])
slice_st = st.tuples(
    st.lists(st.lists(st.tuples(keys_st, ts_st), max_size=5), max_size=3),  # base chunks
    st.lists(st.tuples(rule_st, st.lists(entry_st, max_size=6)), max_size=4),  # blocks
)


def _base(chunks: list[list[tuple[int, int | None]]], g: int) -> pa.Table:
    seen: set[int] = set()  # a base holds a key once
    tables = []
    for chunk in chunks:
        rows = []
        for k, t in chunk:
            if k not in seen:
                seen.add(k)
                rows.append((k, t))
        tables.append(
            pa.table(
                {
                    "id": [k for k, _ in rows],
                    RECORD_KEY_COL: [str(k) for k, _ in rows],
                    "ts": [t for _, t in rows],
                    "v": [f"b{g}"] * len(rows),
                },
                schema=SCHEMA.append(pa.field("v", pa.string())),
            )
        )
    if not tables:
        return SCHEMA.append(pa.field("v", pa.string())).empty_table()
    return pa.concat_tables(tables)  # one chunk per table: a base of several row groups


def _block(entries: list[tuple[str, int, int | None]], tag: str) -> pa.Table:
    return pa.table(
        {
            # a delete carries the record key text alone (keyed/write/merge_on_read.py): its
            # key column is null
            "id": [k if op == UPSERT else None for op, k, _ in entries],
            RECORD_KEY_COL: [str(k) for _, k, _ in entries],
            "ts": [t for _, _, t in entries],
            "v": [f"{tag}.{i}" for i in range(len(entries))],
            OP_COL: [op for op, _, _ in entries],
        },
        schema=LOG_SCHEMA,
    )


def _not_older(stored: int | None, incoming: int | None) -> bool:
    return stored is None or (incoming is not None and incoming >= stored)


def _model(base: pa.Table, blocks: list[tuple[Rule, pa.Table]]) -> list[dict[str, Any]]:
    """One slice merged entry by entry: base survivors in base order, then the surviving
    upserts in log order."""
    state: dict[str, tuple[int, dict[str, Any]]] = {}  # key -> (position, row)
    for i, row in enumerate(base.to_pylist()):
        state[row[RECORD_KEY_COL]] = (i, row)
    at = base.num_rows
    for rule, block in blocks:
        for row in block.to_pylist():
            key, op = row[RECORD_KEY_COL], row.pop(OP_COL)
            stored = state.get(key)
            compare = bool(rule.merge_by) and (op == UPSERT or rule.ordered_deletes)
            if stored is not None and compare and not _not_older(stored[1]["ts"], row["ts"]):
                continue
            if op == UPSERT:
                state[key] = (at, row)
                at += 1
            else:
                state.pop(key, None)
    return [row for _, row in sorted(state.values(), key=lambda pr: pr[0])]


@pytest.mark.unit
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(slice_st, min_size=1, max_size=5))
def test_merge_by_integer_keys_and_by_text_equal_the_model(drawn: list[Any]) -> None:
    slices = []
    want: list[dict[str, Any]] = []
    for g, (chunks, blocks) in enumerate(drawn):
        base = _base(chunks, g)
        logs = [(rule, _block(entries, f"l{g}.{j}")) for j, (rule, entries) in enumerate(blocks)]
        slices.append((base, [lg for _, lg in logs], [r for r, _ in logs]))
        want += _model(base, logs)
    by_number = merge_slices(slices, key_col="id")
    by_text = merge_slices(slices)
    assert by_number.to_pylist() == want
    assert by_text.to_pylist() == want


@pytest.mark.unit
def test_a_projected_snapshot_matches_keys_by_the_integer_key_column(tmp_path: Path) -> None:
    """A projection that leaves out the key column still merges (the reader fetches the
    column keys are matched by, and drops it again)."""
    t = _table(tmp_path, OFF)
    t.upsert(_rows([1, 2, 3, 4], "x"))
    t.upsert(_rows([2, 4], "y"))
    t.delete(pa.table({"id": [3], "p": ["a"]}))
    got = t.read(columns=["v"])
    assert got.column_names == ["v"]
    assert sorted(got.column("v").to_pylist()) == ["x", "y", "y"]
    assert _values(t.read()) == {1: "x", 2: "y", 4: "y"}


@pytest.mark.unit
def test_integer_keys_far_apart_are_matched_in_their_own_slice() -> None:
    """Keys spanning the int64 range (too far apart to number a (slice, key) pair as one
    int64) match as they do when close: each within its own slice."""
    lo, hi = -(2**63) + 1, 2**63 - 1
    base = pa.table(
        {"id": [lo, hi], RECORD_KEY_COL: [str(lo), str(hi)], "ts": [1, 1], "v": ["b", "b"]},
        schema=SCHEMA.append(pa.field("v", pa.string())),
    )
    block = pa.table(
        {
            "id": [hi, None],
            RECORD_KEY_COL: [str(hi), str(lo)],
            "ts": [2, 2],
            "v": ["up", "del"],
            OP_COL: [UPSERT, DELETE],
        },
        schema=LOG_SCHEMA,
    )
    other = base.slice(0, 1)  # a second slice holding the deleted key: untouched
    got = merge_slices([(base, [block], None), (other, [], None)], key_col="id")
    assert got.column("v").to_pylist() == ["up", "b"]
    assert got.column("id").to_pylist() == [hi, lo]
    assert merge(base, [block], key_col="id").column("v").to_pylist() == ["up"]


@pytest.mark.unit
def test_named_rows_that_all_lose_add_no_chunk_and_no_copy() -> None:
    """The usual named rows of a snapshot: every one is replaced by a newer upsert or
    deleted. The merge then neither filters them nor adds an empty piece for them: its
    result is the winning upserts alone, one chunk per slice (and an all-deleted slice
    adds nothing)."""
    named = pa.table(
        {"id": [1, 2], RECORD_KEY_COL: ["1", "2"], "ts": [1, 1], "v": ["b", "b"]},
        schema=SCHEMA.append(pa.field("v", pa.string())),
    )
    block = _block([(UPSERT, 1, 2), (UPSERT, 2, 2)], "l")
    gone = _block([(DELETE, 1, 2), (DELETE, 2, 2)], "d")
    rules = [Rule("ts", True)]
    for key_col in ("id", None):
        got = merge_slices([(named, [block], rules), (named, [gone], rules)], key_col=key_col)
        assert got.column("v").to_pylist() == ["l.0", "l.1"]
        assert got.column("v").num_chunks == 1
        empty = merge_slices([(named, [gone], rules)], key_col=key_col)
        assert empty.num_rows == 0
        assert empty.schema == named.schema
    kept = merge(named, [_block([(UPSERT, 1, 0)], "old")], rules, key_col="id")
    assert kept.column("v").to_pylist() == ["b", "b"]  # an older upsert loses: kept as read
