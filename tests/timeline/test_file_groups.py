"""The file-group model: slices cut by the completion-time rule, the fold that builds the
view from commits, and a compaction plan's slice resolved against it (no storage)."""

from __future__ import annotations

from typing import Any

import pytest

from timeline.file_groups import (
    COMPACTION_DETAIL,
    LOG_FILES,
    FileGroupFold,
    LogFile,
    slice_index,
)
from timeline.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT
from timeline.metadata import DataFile, Entry

pytestmark = pytest.mark.unit


def _base(group: str, n: int, partition: str = "p") -> DataFile:
    return DataFile(f"{partition}/{group}_{n}.parquet", 10, 1, partition, group)


def _log(group: str, instant: str, size: int = 5) -> LogFile:
    return LogFile(f"p/.{group}_{instant}.log.0", group, "p", instant, 0, size, 1, "")


def _entry(seq: int, action: str, **meta: Any) -> Entry:
    return Entry(seq, f"2026010100000{seq:04d}", action, "w", meta)


def test_a_log_belongs_to_the_newest_slice_whose_anchor_is_before_it() -> None:
    assert slice_index([1, 5], 3) == 0
    assert slice_index([1, 5], 5) == 0  # a log completing at the anchor is folded by it
    assert slice_index([1, 5], 6) == 1
    assert slice_index([4], 2) is None


def test_a_compaction_takes_the_logs_completed_after_its_plan() -> None:
    """Logs of delta commits completing while a compaction runs (after its plan's anchor)
    belong to the compacted slice; those before it to the slice it replaces."""
    b0, b1 = _base("g", 0), _base("g", 1)
    early, late = _log("g", "t2"), _log("g", "t4")
    writes = [
        _entry(1, COMMIT, added=[b0.to_json()]),
        _entry(2, DELTA_COMMIT, **{LOG_FILES: [early.to_json()]}),
        _entry(4, DELTA_COMMIT, **{LOG_FILES: [late.to_json()]}),
        _entry(5, COMMIT, added=[b1.to_json()], **{COMPACTION_DETAIL: {"log_anchor_seq": 3}}),
    ]
    view = FileGroupFold.of(writes)
    older, newer = view.groups["g"].slices()
    assert (older.base, [lf for _, lf in older.logs]) == (b0, [early])
    assert (newer.base, newer.anchor, [lf for _, lf in newer.logs]) == (b1, 3, [late])
    assert view.latest_slices()["g"] == newer
    assert view.groups["g"].slices(1) == (newer,)
    assert newer.objects() == {b1.path, late.path}


def test_the_fold_drops_replaced_groups_and_overwritten_partitions() -> None:
    a, b, c = _base("a", 0), _base("b", 0, "q"), _base("c", 0)
    fold = FileGroupFold()
    fold.apply(_entry(1, COMMIT, added=[a.to_json(), b.to_json()]))
    overwrite = _entry(2, REPLACE_COMMIT, added=[c.to_json()], replaced_partitions=["q"])
    assert fold.touched(overwrite) == {"b", "c"}
    fold.apply(overwrite)
    fold.apply(_entry(3, REPLACE_COMMIT, replaced=[a.to_json()]))
    view = fold.view()
    assert set(view.groups) == {"c"}
    assert view.base_files() == {"c": [c]}
    assert view.seq == 3


def test_a_plan_resolves_to_its_slice_only_while_the_group_still_has_it() -> None:
    b0, lg = _base("g", 0), _log("g", "t2")
    writes = [
        _entry(1, COMMIT, added=[b0.to_json()]),
        _entry(2, DELTA_COMMIT, **{LOG_FILES: [lg.to_json()]}),
    ]
    group = FileGroupFold.of(writes).groups["g"]
    planned = group.planned_slice(b0.path, [lg.ref])
    assert planned is not None and planned.logs == ((2, lg),)
    assert group.planned_slice(b0.path, ["p/.g_t9.log.0"]) is None
    assert group.planned_slice("p/other.parquet", [lg.ref]) is None
