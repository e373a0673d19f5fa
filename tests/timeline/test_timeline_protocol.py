"""Protocol details: conflict rules, completions found in the log (holes), fencing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from storage import open_store
from timeline import CommitConflict, DataFile, Table, TableSettings
from timeline.commit import complete
from timeline.conflicts import conflict
from timeline.heartbeat import MTIME_RESOLUTION_S
from timeline.layout import INSTANTS, LOG
from timeline.metadata import Entry, write_metadata

pytestmark = pytest.mark.unit
T1, T2 = "20260101000000001", "20260101000000002"


def _write(time: str, *files: DataFile, replaced_partitions: tuple[str, ...] = ()) -> Entry:
    action = "replacecommit" if replaced_partitions else "commit"
    meta = write_metadata("insert", files, replaced_partitions=replaced_partitions)
    return Entry(1, time, action, "w", meta)


def test_conflict_rules() -> None:
    a = _write(T1, DataFile("data/a", 1, 1, "p=1", "g1"))
    same_group = _write(T2, DataFile("data/b", 1, 1, "p=2", "g1"))
    other_group = _write(T2, DataFile("data/c", 1, 1, "p=1", "g2"))
    overwrite = _write(T2, DataFile("data/d", 1, 1, "p=1", "g3"), replaced_partitions=("p=1",))
    assert conflict(same_group, a) and conflict(a, same_group)
    assert conflict(other_group, a) is None
    assert conflict(overwrite, a) and conflict(a, overwrite)

    fence = Entry(2, T2, "rollback", "w", {"target_time": T1, "target_state": "pending"})
    assert "rolled back" in (conflict(a, fence) or "")
    assert conflict(other_group, fence) is None
    assert "completed before" in (conflict(fence, a) or "")

    restore = Entry(3, T2, "restore", "w", {"target_time": T1, "rolled_back": []})
    assert conflict(other_group, restore) and conflict(restore, a)
    clean = Entry(4, T2, "clean", "w", {"deleted": ["data/x"]})
    keeps = Entry(5, T1, "savepoint", "w", {"files": ["data/x"]})
    keeps_other = Entry(5, T1, "savepoint", "w", {"files": ["data/y"]})
    assert conflict(clean, keeps) and conflict(keeps, clean)
    assert conflict(clean, keeps_other) is None and conflict(a, clean) is None
    assert "already completed" in (conflict(clean, clean) or "")


def test_completion_without_completed_object_is_found_and_rolled_forward(
    tmp_path: Path,
) -> None:
    store = open_store("file://" + str(tmp_path))
    table = Table.open(store)
    first = table.begin()
    key = first.data_key(name="a")
    store.put(key, b"a")
    first.add(DataFile(key, 1, 1))
    # the writer takes its log position and dies before writing the completed object
    intent = Entry(-1, first.instant_time, "commit", "w", write_metadata("insert", first._added))
    logged = complete(table.tl.log, intent, first.base, table.instants.latest_seq, 10)
    first._heartbeat.stop()
    other = Table.open(store)
    txn = other.begin()
    k2 = txn.data_key(name="b")
    store.put(k2, b"b")
    txn.add(DataFile(k2, 1, 1))
    done = txn.commit()
    assert done.seq == logged.seq + 1  # position taken after the dead writer's
    # a hole: position 1 has no completed object, position 2 has one
    assert [o.key for o in store.list(INSTANTS) if ".completed." in o.key] == [
        f"{INSTANTS}{done.name}"
    ]
    fresh = Table.open(store)
    assert sorted(fresh.snapshot().paths()) == sorted([key, k2])
    assert fresh.timeline().get(first.instant_time).is_completed  # type: ignore[union-attr]
    # recovery writes the missing completed object once the writer's heartbeat expired
    fast = Table.open(store, TableSettings(heartbeat_interval_ms=1))
    time.sleep(MTIME_RESOLUTION_S + 0.2)
    assert fast.maintenance.recover() == [f"completed {first.instant_time}.commit"]
    completed = [o.key for o in store.list(INSTANTS) if ".completed." in o.key]
    assert len(completed) == 2
    assert len(list(store.list(LOG))) == 2


def test_a_fenced_writer_cannot_complete(tmp_path: Path) -> None:
    store = open_store("file://" + str(tmp_path))
    writer = Table.open(store)
    txn = writer.begin()
    key = txn.data_key(name="slow")
    store.put(key, b"s")
    txn.add(DataFile(key, 1, 1))
    other = Table.open(store)
    rb = other.maintenance.rollback(txn.instant_time)  # e.g. its heartbeat looked expired
    with pytest.raises(CommitConflict) as info:
        txn.commit()
    assert info.value.winner == rb.time and not store.exists(key)
    assert Table.open(store).snapshot().files == ()
