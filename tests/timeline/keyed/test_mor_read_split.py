"""A snapshot of a merge-on-read table sets each base's rows that no log names apart where
the base is decoded: the merge of many slices sees only the base rows some log names, and the
snapshot still holds every surviving row (an upsert that loses by ordering value keeps the
base row, a delete drops it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from tests.timeline.keyed.test_mor_tables import OFF, _rows, _values
from timeline import Table
from timeline.keyed import KeyedProperties, MergeMode
from timeline.keyed.keys import RECORD_KEY_COL
from timeline.keyed.log import DELETE, OP_COL, UPSERT
from timeline.keyed.read.merge import merge_slices, named_mask

PROPS = KeyedProperties.of(
    "id",
    ordering_field="ts",
    partition_by="p",
    merge_mode=MergeMode.EVENT_TIME,
    table_type="merge_on_read",
)


def _log(ids: list[int | None], keys: list[str], ops: list[str]) -> pa.Table:
    return pa.table(
        {RECORD_KEY_COL: keys, "id": pa.array(ids, pa.int64()), OP_COL: ops},
    )


@pytest.mark.unit
@pytest.mark.parametrize("key_col", ["id", None])
def test_named_mask_matches_keys_as_the_merge_does(key_col: str | None) -> None:
    """Upserts name their key by number or text, a delete by its key text alone."""
    base = pa.table({RECORD_KEY_COL: ["1", "2", "3", "4"], "id": pa.array([1, 2, 3, 4])})
    logs = [
        _log([2], ["2"], [UPSERT]),
        _log([None], ["4"], [DELETE]),
        _log([9], ["9"], [UPSERT]),
    ]
    mask = named_mask(base, logs, key_col)
    assert mask is not None
    assert mask.to_pylist() == [False, True, False, True]
    assert named_mask(base, [_log([], [], [])], key_col) is None


@pytest.mark.unit
def test_the_merge_sees_only_the_base_rows_a_log_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    t = Table.create(store, PROPS, OFF)
    ids = list(range(1, 21))
    t.upsert(_rows(ids, "x", ts=5))
    t.upsert(pa.concat_tables([_rows([2], "late", ts=1), _rows([3, 21], "y", ts=9)]))
    t.delete([4])
    merged_base_rows: list[int] = []

    def recording(slices: Sequence[tuple[pa.Table, Any, Any]], **kw: Any) -> pa.Table:
        merged_base_rows.extend(base.num_rows for base, _, _ in slices)
        return merge_slices(slices, **kw)

    monkeypatch.setattr("timeline.keyed.read.slices.merge_slices", recording)
    got = Table.open(store, OFF).read()
    expected = {i: "x" for i in ids if i != 4} | {3: "y", 21: "y"}
    assert _values(got) == expected
    assert got.num_rows == len(expected)
    # ids 2, 3 and 4 are named by logs; the other 16 base rows never reach the merge
    assert sum(merged_base_rows) == 3
