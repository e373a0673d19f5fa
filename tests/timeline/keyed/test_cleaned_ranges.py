"""Reads that reach cleaned file slices: an incremental or CDC read (copy-on-write and
merge-on-read) raises `RangeNotReadable` naming the earliest readable begin, never a storage
error; a time-travel refusal states the retention the clean actually used."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from timeline import PlanError, RangeNotReadable, Table, TableSettings, TimelineError
from timeline.keyed import KeyedProperties

OFF = TableSettings(compaction_mode="off", local_entry_cache=False)


def _table(tmp_path: Path, table_type: str) -> Table:
    store = open_store(f"file://{tmp_path}/{table_type}", StoreSettings(fsync=False))
    return Table.create(store, KeyedProperties.of("id", table_type=table_type), OFF)


def _up(t: Table, ids: list[int], v: str) -> str:
    return t.upsert(pa.table({"id": ids, "v": [v] * len(ids)})).time


@pytest.mark.unit
@pytest.mark.parametrize("cdc", [False, True], ids=["incremental", "cdc"])
def test_a_change_read_over_a_slice_cleaned_under_a_compaction(tmp_path: Path, cdc: bool) -> None:
    """A delta commit completing while a compaction is planned belongs to the compaction's
    new slice, so the cleaner keeps its log but removes the base it was first merged with;
    a change read ending at it reads that base."""
    t = _table(tmp_path, "merge_on_read")
    _up(t, [1, 2], "a")
    b = _up(t, [1], "b")
    planned = t.maintenance.schedule_compaction()
    e = _up(t, [2], "e")  # completes before the compaction: its log joins the new slice
    assert t.maintenance.run_compaction() == [planned]
    assert t.maintenance.clean(retained=1) is not None
    with pytest.raises(RangeNotReadable) as got:
        t.changes(b, e, cdc=cdc)
    assert "cleaned" in str(got.value)
    # the range up to now reads the kept slices: the change of `e` is there
    if not cdc:
        rows = t.changes(b, cdc=cdc).to_pylist()
        assert [(r["id"], r["v"]) for r in rows] == [(2, "e")]


@pytest.mark.unit
@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_cdc_across_cleaned_slices_names_the_earliest_readable_begin(
    tmp_path: Path, table_type: str
) -> None:
    t = _table(tmp_path, table_type)
    first = _up(t, [1, 2], "a")
    for v in "bcd":
        _up(t, [1], v)
    if table_type == "merge_on_read":
        assert t.maintenance.compact() is not None
    _up(t, [2], "e")
    assert t.maintenance.clean(retained=1) is not None
    for cdc in (False, True):
        with pytest.raises(RangeNotReadable) as got:
            t.changes(first, cdc=cdc)
        earliest = got.value.earliest
        assert earliest and earliest in str(got.value)
        t.changes(earliest, cdc=cdc)  # readable from there


@pytest.mark.unit
def test_time_travel_refusal_states_the_retention_the_clean_used(tmp_path: Path) -> None:
    t = _table(tmp_path, "copy_on_write")
    first = _up(t, [1], "a")
    second = _up(t, [1], "b")
    third = _up(t, [1], "c")
    done = t.maintenance.clean(retained=2)
    assert done is not None
    with pytest.raises(TimelineError) as got:
        t.read(as_of=first)
    text = str(got.value)
    assert "the last 2 commits" in text and "last 10" not in text
    assert f"the earliest readable instant is {second}" in text
    assert t.read(as_of=third).num_rows == 1


@pytest.mark.unit
@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_a_rollback_that_would_bring_back_cleaned_files_is_refused(
    tmp_path: Path, table_type: str
) -> None:
    """Rolling back the newest write makes the snapshot before it the latest again: when a
    clean deleted files that snapshot reads, the rollback is refused and the table stays
    readable, instead of answering "object not found" from then on."""
    t = _table(tmp_path, table_type)
    for v in "abcde":
        last = _up(t, [1, 2], v)
        if table_type == "merge_on_read":  # a new slice per version, as copy-on-write makes
            done = t.maintenance.compact()  # None after the first write: no logs yet
            last = done.time if done is not None else last
    assert t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1) is not None
    with pytest.raises(PlanError, match=r"cannot roll back .* a clean deleted"):
        t.maintenance.rollback(last)
    assert t.read().column("v").to_pylist() == ["e", "e"]


@pytest.mark.unit
def test_time_travel_to_the_latest_after_a_rollback_is_served(tmp_path: Path) -> None:
    """A rollback within what the clean kept leaves an older snapshot as the latest: below
    the clean's retained position but whole, so a time travel to it is served."""
    t = _table(tmp_path, "copy_on_write")
    times = [_up(t, [1], v) for v in "abcde"]
    assert t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=2) is not None
    t.maintenance.rollback(times[-1])
    assert t.read(as_of=times[-2]).column("v").to_pylist() == ["d"]
    assert t.read().column("v").to_pylist() == ["d"]
    with pytest.raises(TimelineError, match="files were cleaned"):
        t.read(as_of=times[0])
