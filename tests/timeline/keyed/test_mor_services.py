"""Cleaner and archival around merge-on-read compactions: the cleaner keeps what a pending
compaction, a savepoint or the retained commits read (base files and their logs), removes
the rest by Hudi's policies; a real pending compaction blocks archival until it completes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from tests.support.backends import Backend
from timeline import Table, TableSettings
from timeline.archive import ArchivalSettings, Archiver
from timeline.keyed import KeyedProperties
from timeline.keyed.compaction.service import completed_compactions

PROPS = KeyedProperties.of("id", table_type="merge_on_read")
OFF = TableSettings(compaction_mode="off", local_entry_cache=False)


def _table(tmp_path: Path, settings: TableSettings = OFF) -> Table:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    return Table.create(store, PROPS, settings)


def _up(t: Table, ids: list[int], v: str) -> str:
    return t.upsert(pa.table({"id": ids, "v": [v] * len(ids)})).time


def _values(data: pa.Table) -> dict[int, str]:
    return dict(zip(data.column("id").to_pylist(), data.column("v").to_pylist(), strict=True))


def _objects(t: Table) -> set[str]:
    return {o.key for o in t.store.list("data/")}


def _log_objects(t: Table) -> set[str]:
    """The log objects of the table's live delta commits."""
    return {lf.path for _, lf in t.state().live_logs().values()}


@pytest.mark.unit
def test_clean_removes_compacted_slices_with_their_logs(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _up(t, [1, 2], "a")
    _up(t, [1], "b")
    _up(t, [2], "c")
    old_logs = _log_objects(t)
    old_base = {f.path for f in t.snapshot().files}
    t.maintenance.compact()
    _up(t, [1], "d")  # a log of the new slice
    done = t.maintenance.clean(retained=1)
    assert done is not None
    gone = set(t.entry(done.time).deleted)
    assert old_logs | old_base <= gone
    assert not (old_logs | old_base) & _objects(t)
    assert _values(t.read()) == {1: "d", 2: "c"}
    newest = _log_objects(t) - old_logs
    assert newest and newest <= _objects(t)  # the new slice's log stays


@pytest.mark.unit
def test_clean_keeps_what_a_pending_compaction_and_a_savepoint_read(tmp_path: Path) -> None:
    t = _table(tmp_path)
    first = _up(t, [1], "a")
    _up(t, [1], "b")
    t.maintenance.savepoint(first)
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    planned_logs = _log_objects(t)
    for k in range(4):
        _up(t, [2 + k], "x")  # new file groups: retained commits move on
    assert t.maintenance.clean(retained=1) is None or planned_logs <= _objects(t)
    assert planned_logs <= _objects(t)  # the plan still reads them
    assert t.maintenance.run_compaction() == [planned]
    assert _values(t.read(as_of=first)) == {1: "a"}  # the savepoint's slice is kept
    assert _values(t.read())[1] == "b"


@pytest.mark.unit
def test_keep_latest_file_versions_keeps_slices_whole(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _up(t, [1], "a")
    _up(t, [1], "b")
    t.maintenance.compact()
    _up(t, [1], "c")
    t.maintenance.compact()
    _up(t, [1], "d")
    done = t.maintenance.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=2)
    assert done is not None
    st = t.state()
    slices = st.file_slices()
    (group,) = slices
    kept_bases = {f.path for f in slices[group][-2:]}
    assert kept_bases <= _objects(t)
    assert _values(t.read()) == {1: "d"}


def test_pending_compaction_blocks_archival_until_it_completes(tbackend: Backend) -> None:
    s = replace(OFF, archival=ArchivalSettings(keep_min_commits=2, keep_max_commits=3))
    s = replace(s, archival=replace(s.archival, auto_archive=False))
    t = Table.create(tbackend.open().scoped("tables/mor"), PROPS, s)
    _up(t, [1], "a")
    _up(t, [1], "b")
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    for k in range(5):
        _up(t, [1], str(k))
    archiver = Archiver(t, s.archival)
    result = archiver.run()
    assert "pending compaction" in result.limit_reason
    assert all(i.time < planned for i in result.archived)
    assert t.maintenance.run_compaction() == [planned]
    t.maintenance.compact()
    result = archiver.run()
    assert any(i.time >= planned for i in result.archived)
    assert _values(t.read()) == {1: "4"}
    assert len(completed_compactions(t.state())) >= 1
