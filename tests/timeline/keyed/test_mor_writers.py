"""Writers that build new slices of a merge-on-read table's file groups do so from each
group's merged state (base and logs) or not at all: clustering leaves groups with logs to
compaction and conflicts with a delta commit into the groups it rewrites, insert_overwrite
keeps the logged updates and deletes of the partitions it does not replace, and an engine's
keyed write (which rewrites groups from their base files alone) refuses the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import ErrorKind, StoreSettings, kind_of, open_store
from timeline import (
    COMMIT,
    CommitConflict,
    Table,
    TableSettings,
    WriterNotSupported,
    plan_engine_write,
)
from timeline.keyed import KeyedProperties
from timeline.keyed.write import KeyedWriteRequest, write_keyed
from timeline.parquet_io import read_files

MOR = KeyedProperties.of("id", partition_by="p", table_type="merge_on_read")
COW = KeyedProperties.of("id", partition_by="p")
#: No compaction, and new keys in new file groups only: each upsert of new keys is a group.
SETTINGS = TableSettings(compaction_mode="off", small_file_limit=0, local_entry_cache=False)


def _table(tmp_path: Path, props: KeyedProperties = MOR) -> Table:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    return Table.create(store, props, SETTINGS)


def _reopen(t: Table) -> Table:
    return Table.open(open_store(t.uri, StoreSettings(fsync=False)), SETTINGS)


def _rows(ids: list[int], v: int, p: str | None = None) -> pa.Table:
    parts = [p or ("a" if i % 2 else "b") for i in ids]
    return pa.table({"id": ids, "p": parts, "v": [v] * len(ids)})


def _values(t: Table) -> dict[int, int]:
    return {r["id"]: r["v"] for r in t.read().select(["id", "v"]).to_pylist()}


def _with_logged_changes(tmp_path: Path) -> Table:
    """Four file groups (two per partition); two of them get logs holding updates and
    deletes, the other two have none."""
    t = _table(tmp_path)
    for k in range(4):
        t.upsert(_rows(list(range(k * 10, k * 10 + 10)), 0))
    t.upsert(_rows([1, 2, 11, 12], 1))
    t.delete([3, 4, 13])
    slices = t.snapshot().merge_on_read_slices()
    assert slices is not None
    assert 0 < sum(1 for s in slices if s.logs) < len(slices)
    return t


@pytest.mark.unit
def test_clustering_keeps_the_updates_and_deletes_logs_hold(tmp_path: Path) -> None:
    t = _with_logged_changes(tmp_path)
    before = _values(t)
    assert before[1] == 1 and before[12] == 1 and 3 not in before and 13 not in before
    slices = t.snapshot().merge_on_read_slices()
    assert slices is not None
    with_logs = {s.base.path for s in slices if s.logs}
    done = t.maintenance.cluster()
    assert done is not None
    replaced = {f.path for f in t.entry(done.time).replaced}
    assert replaced and not replaced & with_logs  # groups with logs are compaction's
    assert _values(_reopen(t)) == before


@pytest.mark.unit
def test_clustering_conflicts_with_a_delta_commit_into_its_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delta commit that appends logs to a group clustering is rewriting (it completes
    first) makes the clustering fail: its new file was built without those logs."""
    t = _table(tmp_path)
    t.upsert(_rows(list(range(10)), 0))
    t.upsert(_rows(list(range(10, 20)), 0))
    raced: list[str] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        if not raced:
            other = _reopen(t)
            raced.append(other.upsert(_rows([1, 2], 7)).time)
            other.delete([3])
        return read_files(*args, **kwargs)

    monkeypatch.setattr("timeline.clustering.read_files", racing)
    with pytest.raises(CommitConflict) as caught:
        t.maintenance.cluster()
    assert caught.value.winner == raced[0]
    got = _values(_reopen(t))
    assert got[1] == 7 and got[2] == 7 and 3 not in got and len(got) == 19


@pytest.mark.unit
def test_insert_overwrite_keeps_the_logs_of_partitions_it_does_not_replace(
    tmp_path: Path,
) -> None:
    """Overwriting partition a replaces its file groups (logs and all); partition b's
    logged updates and deletes stay, also after a compaction scheduled before the overwrite
    runs."""
    t = _with_logged_changes(tmp_path)
    before = _values(t)
    pending = t.maintenance.schedule_compaction()
    assert pending is not None
    t.write(_rows([101, 103], 5, "a"), mode="overwrite")
    want = {k: v for k, v in before.items() if k % 2 == 0} | {101: 5, 103: 5}
    assert want[2] == 1 and want[12] == 1 and 4 not in want  # b's logged changes
    assert _values(_reopen(t)) == want
    t.maintenance.run_compaction(pending)
    t.maintenance.compact()
    assert _values(_reopen(t)) == want


@pytest.mark.unit
def test_a_delta_commit_into_a_partition_overwritten_meanwhile_conflicts(tmp_path: Path) -> None:
    """Logs appended to a file group an insert_overwrite replaced (it completed first) would
    belong to no live slice: the delta commit fails instead of landing unread."""
    t = _table(tmp_path)
    t.upsert(_rows(list(range(10)), 0))
    done: list[str] = []

    def overwrite(_: Any) -> None:
        done.append(_reopen(t).write(_rows([101], 5, "a"), mode="overwrite").time)

    with pytest.raises(CommitConflict) as caught:
        write_keyed(
            t, KeyedWriteRequest(MOR, "upsert", data=_rows([1, 2, 3], 7), on_plan=overwrite)
        )
    assert caught.value.winner == done[0]
    assert _values(_reopen(t)) == {0: 0, 2: 0, 4: 0, 6: 0, 8: 0, 101: 5}


@pytest.mark.unit
def test_the_engine_plan_refuses_a_rewrite_of_a_merge_on_read_table(tmp_path: Path) -> None:
    """A `commit` rewrites file groups from their base files alone: the engine's plan refuses
    one on a merge-on-read table, with one line naming the table type and the action its
    writes take (delta commits); a copy-on-write table plans it."""
    t = _with_logged_changes(tmp_path)
    txn = t.begin(COMMIT, operation="upsert")
    try:
        with pytest.raises(WriterNotSupported) as caught:
            plan_engine_write(t, txn, MOR, _rows([1], 9).schema, "upsert")
    finally:
        txn.abort()
    message = str(caught.value)
    assert "\n" not in message and "merge_on_read" in message and "deltacommit" in message
    assert kind_of(caught.value) == ErrorKind.REFUSED
    cow = _table(tmp_path / "cow", COW)
    cow.upsert(_rows([1, 2], 0))
    txn = cow.begin(COMMIT, operation="upsert")
    try:  # copy-on-write: what the engine writer builds
        plan = plan_engine_write(cow, txn, COW, _rows([1], 9).schema, "upsert")
        assert plan.state.snapshot().files
    finally:
        txn.abort()
