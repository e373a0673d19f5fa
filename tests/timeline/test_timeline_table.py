"""Tables on the timeline: writes, snapshots, time travel, replace, clustering, clean,
rollback, savepoint/restore, heartbeats. Run on the local backend and on MinIO."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import BackendError, ObjectStore
from tests.support.backends import Backend
from timeline import (
    CLEAN,
    COMMIT,
    REPLACE_COMMIT,
    RESTORE,
    ROLLBACK,
    DataFile,
    Instant,
    PlanError,
    State,
    Table,
    TableSettings,
    TimelineError,
)
from timeline.heartbeat import MTIME_RESOLUTION_S
from timeline.layout import INSTANTS, LOG, data_prefix
from timeline.settings import EAGER, KEEP_LATEST_FILE_VERSIONS


@pytest.fixture
def tstore(backend: Backend) -> ObjectStore:
    return backend.open().scoped("tables/t1")


def _rows(n: int, start: int = 0, part: str = "a") -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "p": [part] * n})


def _ids(table: Table, as_of: str | None = None) -> list[int]:
    data = table.read(as_of)
    return sorted(data.column("id").to_pylist()) if data.num_rows else []


def test_write_read_time_travel_and_metadata(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    assert table.snapshot().files == () and table.read().num_rows == 0
    i1 = table.write(_rows(3), partition_by="p", extra_metadata={"first_event": "0"})
    i2 = table.write(pa.concat_tables([_rows(2, 10, "a"), _rows(2, 20, "b")]), partition_by="p")
    assert i1.action == COMMIT and i1.state is State.COMPLETED and i2.seq == (i1.seq or 0) + 1
    assert _ids(table) == [0, 1, 2, 10, 11, 20, 21]
    assert _ids(table, as_of=i1.time) == [0, 1, 2]
    snap = table.snapshot()
    assert snap.instant_time == i2.time and snap.rows == 7 and snap.partitions() == ["p=a", "p=b"]
    f = next(f for f in snap.files if f.partition == "p=b")
    assert f.column_stats["id"] == {"nulls": 0, "min": 20, "max": 21}
    assert table.entry(i1.time).extra == {"first_event": "0"}
    assert table.entry(i2.time).metadata["operation"] == "insert"
    # a second reader (on another machine: no local entry cache) sees the same state from
    # metadata alone
    other = Table.open(tstore, TableSettings(local_entry_cache=False))
    tstore.stats.reset()
    assert other.snapshot() == snap
    # LIST instants, one GET probing the log tail, one GET per completed instant; no data
    # listing and no log listing (its cost would grow with the history)
    assert tstore.stats.snapshot() == {"LIST": 1, "GET": 3}
    # a reader on this machine finds the entries this machine wrote on disk: only the probe
    local = Table.open(tstore)
    tstore.stats.reset()
    assert local.snapshot() == snap
    assert tstore.stats.snapshot() == {"LIST": 1, "GET": 1}
    tstore.stats.reset()
    assert other.snapshot() == snap
    assert tstore.stats.snapshot() == {"LIST": 1, "GET": 1}  # immutable bodies are cached


def test_low_level_transaction_and_replace(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    txn = table.begin(action=COMMIT)
    assert tstore.exists(f"{INSTANTS}{txn.instant_time}.commit.requested")
    assert tstore.exists(f"{INSTANTS}{txn.instant_time}.commit.inflight")
    key = txn.data_key(partition="", name="f1.parquet")
    tstore.put(key, b"not parquet, just bytes")
    txn.add(DataFile(path=key, size=23, rows=1, file_group="g1", column_stats={"x": {"min": 1}}))
    with pytest.raises(TimelineError):
        txn.add(DataFile(path="elsewhere/f.parquet", size=1, rows=1))
    assert table.snapshot().files == ()  # pending: invisible
    done = txn.commit(extra_metadata={"journal_keys": "j1,j2"})
    assert table.entry(done.time).extra == {"journal_keys": "j1,j2"}
    assert [f.path for f in table.snapshot().files] == [key]

    rep = table.begin(action=REPLACE_COMMIT)
    new_key = rep.data_key(name="f2.parquet")
    tstore.put(new_key, b"merged")
    rep.add(DataFile(path=new_key, size=6, rows=1, file_group="g2"))
    rep.replace([key])
    rinst = rep.commit()
    assert rinst.action == REPLACE_COMMIT
    assert [f.path for f in table.snapshot().files] == [new_key]
    assert [f.path for f in table.snapshot(as_of=done.time).files] == [key]
    # a newer slice of the same file group supersedes the older one
    up = table.begin()
    k3 = up.data_key(name="f3.parquet")
    tstore.put(k3, b"v2")
    up.add(DataFile(path=k3, size=2, rows=1, file_group="g2"))
    up.commit()
    assert [f.path for f in table.snapshot().files] == [k3]


def test_abort_deletes_files_and_pending_states(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    txn = table.begin()
    key = txn.data_key(name="x.parquet")
    tstore.put(key, b"x")
    txn.abort()
    assert not tstore.exists(key)
    assert list(tstore.list(INSTANTS)) == []
    with pytest.raises(ValueError), table.begin() as t2:
        tstore.put(t2.data_key(name="y"), b"y")
        raise ValueError("writer failed")
    assert list(tstore.list("data/")) == [] and table.timeline().empty()


@pytest.mark.parametrize("step", ["failed-writes check", "inflight", "heartbeat"])
def test_a_write_failing_before_its_transaction_rolls_back_at_once(
    tstore: ObjectStore, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """A write that fails after creating `requested` but before it has a transaction (no
    data yet) knows it failed: nothing stays pending for a heartbeat expiry to find."""
    table = Table.open(tstore)
    first = table.write(pa.table({"id": [1]}))

    def fail(*_: object, **__: object) -> None:
        raise BackendError(f"{step}: the endpoint refused the request")

    if step == "failed-writes check":
        monkeypatch.setattr(table, "_check_failed_writes", fail)
    elif step == "inflight":
        real = table.tl.states.create

        def create(inst: Instant, body: bytes) -> None:
            if inst.state is State.INFLIGHT:
                fail()
            real(inst, body)

        monkeypatch.setattr(table.tl.states, "create", create)
    else:
        monkeypatch.setattr("timeline.txn.Heartbeat.start", fail)
    with pytest.raises(BackendError, match=step):
        table.write(pa.table({"id": [2]}))
    monkeypatch.undo()
    fresh = Table.open(tstore)
    assert fresh.timeline().pending().empty()
    assert {i.time for i, _ in fresh.tl.states.list_states()} == {first.time}
    assert fresh.read().column("id").to_pylist() == [1]


def test_overwrite_and_delete_partition(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    table.write(pa.concat_tables([_rows(2, 0, "a"), _rows(2, 10, "b")]), partition_by="p")
    ow = table.write(_rows(1, 100, "a"), mode="overwrite", partition_by="p")
    assert ow.action == REPLACE_COMMIT
    assert _ids(table) == [10, 11, 100]
    assert table.entry(ow.time).metadata["operation"] == "insert_overwrite"
    dp = table.delete_partition(["p=b"])
    assert dp.action == REPLACE_COMMIT and _ids(table) == [100]
    table.write(_rows(2, 200, "c"), mode="overwrite")  # whole table
    assert _ids(table) == [200, 201]


def test_write_parquet_files(tstore: ObjectStore, tmp_path: Path) -> None:
    paths = []
    for k in range(3):
        p = tmp_path / f"in{k}.parquet"
        pq.write_table(_rows(2, k * 10), p)
        paths.append(str(p))
    table = Table.open(tstore)
    table.write(paths)
    assert _ids(table) == [0, 1, 10, 11, 20, 21]
    assert table.snapshot().rows == 6


def test_clustering_replaces_small_files(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    for k in range(4):
        table.write(_rows(2, k * 10))
    before = table.snapshot()
    assert len(before.files) == 4
    inst = table.maintenance.cluster()
    assert inst is not None and inst.action == REPLACE_COMMIT
    after = table.snapshot()
    assert len(after.files) == 1 and after.rows == 8
    assert _ids(table) == _ids(table, as_of=before.instant_time)
    plan = tstore.get(f"{INSTANTS}{inst.time}.replacecommit.requested")
    assert b'"groups"' in plan and before.files[0].path.encode() in plan
    assert table.maintenance.cluster() is None  # one file left: nothing to cluster


def test_clean_keep_latest_commits(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    first = table.write(_rows(2))
    table.write(_rows(2, 10))
    table.maintenance.cluster()  # replaces both files
    table.write(_rows(1, 20))
    old = {f.path for f in table.snapshot(as_of=first.time).files}
    assert table.maintenance.clean(retained=5) is None  # still needed by retained commits
    inst = table.maintenance.clean(retained=1)
    assert inst is not None and inst.action == CLEAN
    assert all(not tstore.exists(p) for p in old)
    assert table.entry(inst.time).deleted == tuple(sorted(old | _written_by(table, 1)))
    assert _ids(table) == [0, 1, 10, 11, 20]
    with pytest.raises(TimelineError, match="cleaned"):
        table.read(as_of=first.time)
    plan = tstore.get(f"{INSTANTS}{inst.time}.clean.requested")
    assert b'"deleted"' in plan


def _written_by(table: Table, nth: int) -> set[str]:
    writes = table.state().ordered_writes()
    return {f.path for f in writes[nth].added} if len(writes) > nth else set()


def test_clean_keep_latest_file_versions(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    paths = []
    for k in range(4):  # four slices of one file group
        txn = table.begin()
        key = txn.data_key(name=f"v{k}.parquet")
        tstore.put(key, b"v")
        txn.add(DataFile(key, 1, 1, file_group="fg1"))
        txn.commit()
        paths.append(key)
    inst = table.maintenance.clean(policy=KEEP_LATEST_FILE_VERSIONS, retained=2)
    assert inst is not None
    assert [tstore.exists(p) for p in paths] == [False, False, True, True]
    assert table.snapshot().paths() == [paths[-1]]


def test_rollback_pending_and_completed(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    keep = table.write(_rows(1))
    txn = table.begin()
    key = txn.data_key(name="partial.parquet")
    tstore.put(key, b"partial")
    rb = table.maintenance.rollback(txn.instant_time)
    assert rb.action == ROLLBACK and not tstore.exists(key)
    meta = table.entry(rb.time).metadata
    assert meta["target_time"] == txn.instant_time and key in meta["deleted"]
    assert table.timeline().get(txn.instant_time) is None
    with pytest.raises(TimelineError, match="rolled back"):  # the writer is fenced off
        txn.commit()
    last = table.write(_rows(1, 5))
    with pytest.raises(PlanError):
        table.maintenance.rollback(keep.time)  # not the latest: restore instead
    table.maintenance.rollback(last.time)
    assert _ids(table) == [0] and table.timeline().get(last.time) is None


def test_savepoint_and_restore(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    table.write(_rows(1))
    sp_at = table.write(_rows(1, 1))
    sp = table.maintenance.savepoint(sp_at.time)
    assert sp.time == sp_at.time and sp.action == "savepoint"
    assert not tstore.exists(f"{INSTANTS}{sp.time}.savepoint.requested")  # Hudi: no requested
    later = [table.write(_rows(1, 10 + k)) for k in range(3)]
    table.maintenance.cluster()
    assert table.maintenance.clean(retained=1) is not None  # savepointed files survive the cleaner
    assert _ids(table, as_of=sp_at.time) == [0, 1]
    res = table.maintenance.restore(sp_at.time)
    assert res.action == RESTORE
    assert _ids(table) == [0, 1]
    rolled = table.entry(res.time).rolled_back
    assert [n.split(".")[0] for n in rolled][-3:] == [i.time for i in reversed(later)]
    assert all(table.timeline().get(i.time) is None for i in later)
    with pytest.raises(PlanError):
        table.maintenance.restore(later[0].time)
    table.write(_rows(1, 50))
    assert _ids(table) == [0, 1, 50]


def test_lazy_rollback_of_expired_heartbeat(tstore: ObjectStore) -> None:
    fast = TableSettings(heartbeat_interval_ms=200, heartbeat_tolerable_misses=1)
    table = Table.open(tstore, fast)
    txn = table.begin()
    tstore.put(txn.data_key(name="orphan"), b"o")
    txn._heartbeat.stop()  # the writer "dies": no more beats
    other = Table.open(tstore, fast)
    other.write(_rows(1))  # not expired yet: left alone
    assert other.timeline().get(txn.instant_time) is not None
    time.sleep(0.4 + MTIME_RESOLUTION_S + 0.6)  # expiry + S3's 1 s Last-Modified resolution
    other.write(_rows(1, 1))
    assert other.timeline().get(txn.instant_time) is None
    assert list(tstore.list(data_prefix(txn.instant_time))) == []
    assert other.timeline().actions(ROLLBACK).completed().times()


def test_live_heartbeat_protects_a_slow_writer(tstore: ObjectStore) -> None:
    fast = TableSettings(heartbeat_interval_ms=200, heartbeat_tolerable_misses=2)
    table = Table.open(tstore, fast)
    txn = table.begin()
    time.sleep(1.5)  # beats keep coming
    other = Table.open(tstore, fast)
    assert other.maintenance.recover() == []
    key = txn.data_key(name="slow")
    tstore.put(key, b"s")
    txn.add(DataFile(key, 1, 1))
    txn.commit()
    assert other.snapshot().paths() == [key]


def test_eager_policy_rolls_back_every_pending_write(tstore: ObjectStore) -> None:
    table = Table.open(tstore, TableSettings(failed_writes_cleaner_policy=EAGER))
    dead = table.begin()
    dead.detach()  # its writer is gone: no more beats (a beating thread would outlive the test)
    table.write(_rows(1))
    assert table.timeline().get(dead.instant_time) is None


def test_recovery_never_rolls_back_a_write_completed_after_its_listing(
    tstore: ObjectStore,
) -> None:
    """A listing made while a write was pending (Table.begin reuses one younger than a second,
    e.g. made by the previous write's `replace`) must not get that write rolled back once it
    completed: recovery checks the reloaded timeline first."""
    from timeline.recovery import handle_failed_writes

    table = Table.open(tstore, TableSettings(failed_writes_cleaner_policy=EAGER))
    txn = table.begin()
    stale = table.instants.load()  # the write is pending in it
    key = txn.data_key(name="f")
    tstore.put(key, b"f")
    txn.add(DataFile(key, 1, 1))
    done = txn.commit()
    assert stale.timeline.pending().get(done.time) is not None
    assert handle_failed_writes(table, stale, exclude="") == []
    assert table.timeline().completed().get(done.time) is not None
    assert table.snapshot().paths() == [key]


def test_happy_path_request_count(tstore: ObjectStore) -> None:
    table = Table.open(tstore)
    table.write(_rows(1))
    tstore.stats.reset()
    txn = table.begin()
    key = txn.data_key(name="f")
    tstore.put(key, b"f")
    txn.add(DataFile(key, 1, 1))
    txn.commit()
    counts = tstore.stats.snapshot()
    counts["PUT"] -= 1  # the data file itself
    counts.pop("PROBE", None)  # S3 capability check: answered from a per-process cache
    assert counts == {"PUT": 4, "LIST": 1}  # requested, LIST, inflight, log, completed
    assert len(list(tstore.list(LOG))) == 2
