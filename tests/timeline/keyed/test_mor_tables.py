"""Merge-on-read keyed tables: log blocks (integrity, retried blocks read once, rollback),
compaction triggers and plans, compaction running beside writers (threads), async compaction.
The random-sequence comparison with copy-on-write and the model is in
test_keyed_differential.py; crash points in test_mor_crash.py."""

from __future__ import annotations

import json
import random
import threading
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from storage import IntegrityError, StoreSettings, checksum_of, open_blob, open_store, seal_blob
from tests.support.keyed_model import KeyedModel, table_rows
from timeline import Table, TableSettings
from timeline.errors import CommitConflict
from timeline.file_groups.log_files import LOG_FILES, LogFile
from timeline.instant import COMPACTION, Instant, State
from timeline.keyed import KeyedProperties
from timeline.keyed.compaction.service import completed_compactions, wait_async
from timeline.keyed.keys import COMMIT_TIME_COL, RECORD_KEY_COL
from timeline.keyed.log.block import OP_COL, read_log
from timeline.keyed.write import KeyedWriteRequest, write_keyed
from timeline.metadata import decode_plan

PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="p", table_type="merge_on_read")
OFF = TableSettings(compaction_mode="off", local_entry_cache=False)


def _table(tmp_path: Path, settings: TableSettings = OFF) -> Table:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    return Table.create(store, PROPS, settings)


def _rows(ids: list[int], v: str, ts: int = 1) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "p": ["a" if i % 2 else "b" for i in ids],
            "v": [v] * len(ids),
        }
    )


def _values(data: pa.Table) -> dict[int, str]:
    return dict(zip(data.column("id").to_pylist(), data.column("v").to_pylist(), strict=True))


@pytest.mark.unit
def test_updates_go_to_logs_and_new_keys_to_new_base_files(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1, 2], "x"))
    done = t.upsert(pa.concat_tables([_rows([1], "y"), _rows([3], "z")]))
    e = t.entry(done.time)
    assert done.action == "deltacommit"
    assert len(e.metadata[LOG_FILES]) == 1  # id 1's file group
    assert [f.rows for f in e.added] == [1]  # id 3: a new base file
    assert _values(t.read()) == {1: "y", 2: "x", 3: "z"}
    assert _values(t.read(read_optimized=True)) == {1: "x", 2: "x", 3: "z"}
    projected = t.read(columns=["id", "v"])
    assert projected.column_names == ["id", "v"] and _values(projected) == _values(t.read())
    t.delete([2])
    assert _values(t.read()) == {1: "y", 3: "z"}
    t.maintenance.compact()
    assert _values(t.read(read_optimized=True)) == {1: "y", 3: "z"} == _values(t.read())


def _stored_columns(data: bytes) -> list[str]:
    """The columns a log block stores (a few rows: one zstd frame of the whole stream)."""
    body = bytes(open_blob(data, "block")[0])
    if body[:4] == b"FLZ1":
        size = int.from_bytes(body[4:12], "little")
        body = pa.Codec("zstd").decompress(body[12:], decompressed_size=size).to_pybytes()
    return list(ipc.open_stream(pa.BufferReader(body)).schema.names)


@pytest.mark.unit
def test_log_blocks_leave_out_the_columns_their_header_implies(tmp_path: Path) -> None:
    """Commit time, op and a record key that is the key column's text are rebuilt from the
    header, not stored; blocks that do not fit (a delete has no id value) keep the record
    key, and blocks of the first format, every column stored, stay readable."""
    t = _table(tmp_path)
    t.upsert(_rows([1, 2, 3, 4], "x"))
    up = t.upsert(_rows([1, 3], "y"))  # one group per partition: id 1 and 3 share "a"
    gone = t.delete([2])
    for done, stored_key in ((up, False), (gone, True)):
        (raw,) = t.entry(done.time).metadata[LOG_FILES]
        names = _stored_columns(t.store.get(raw["path"]))
        assert COMMIT_TIME_COL not in names and OP_COL not in names
        assert (RECORD_KEY_COL in names) == stored_key
        rows = read_log(t.store, LogFile.from_json(raw))
        assert rows.column(COMMIT_TIME_COL).to_pylist() == [done.time] * rows.num_rows
        assert rows.column(RECORD_KEY_COL).to_pylist() == (["1", "3"] if not stored_key else ["2"])
        assert rows.column(OP_COL).to_pylist() == (["U", "U"] if not stored_key else ["D"])
    # A format-1 block (every column stored) written over the delta commit's block.
    (raw,) = t.entry(up.time).metadata[LOG_FILES]
    lf = LogFile.from_json(raw)
    rows = read_log(t.store, lf)
    header = {"format": "flowledger.log-block/1", "instant": up.time, "file_group": lf.file_group}
    old = rows.replace_schema_metadata({"flowledger.log": json.dumps({**header, "block": 0})})
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, old.schema) as w:
        w.write_table(old)
    sealed = seal_blob(sink.getvalue().to_pybytes())
    t.store.put(lf.path, sealed)
    whole = replace(lf, size=len(sealed), checksum=checksum_of(sealed), offset=None, head=0)
    assert read_log(t.store, whole).equals(rows)


@pytest.mark.unit
def test_rolled_back_delta_commit_is_invisible(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1, 2], "x"))
    bad = t.upsert(_rows([1], "bad"))
    t.maintenance.rollback(bad.time)
    assert _values(t.read()) == {1: "x", 2: "x"}
    assert t.changes(None, cdc=True).num_rows == 2  # the two inserts only


@pytest.mark.unit
def test_log_blocks_are_verified_and_a_retried_block_is_read_once(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1], "x"))
    done = t.upsert(_rows([1], "y"))
    (raw,) = t.entry(done.time).metadata[LOG_FILES]
    lf = LogFile.from_json(raw)
    assert read_log(t.store, lf).num_rows == 1
    # A task retried under another file name wrote the same block again: recorded twice,
    # read once.
    copy = f"{lf.path}.attempt-2"
    t.store.put(copy, t.store.get(lf.path))
    txn = t.begin("deltacommit", operation="upsert")
    again = replace(lf, path=copy)
    block = {**raw, "path": copy}
    txn.schema = t.schema()
    txn.commit(details={LOG_FILES: [raw, block], "write_stats": []})
    assert _values(t.read()) == {1: "y"}
    # Under another instant or file group the header does not match: refused.
    with pytest.raises(IntegrityError, match="holds block"):
        read_log(t.store, replace(again, instant="20200101000000000"))
    # Corrupt bytes: the recorded checksum fails before anything is decoded.
    body = bytearray(t.store.get(lf.path))
    body[10] ^= 0xFF
    t.store.put(lf.path, bytes(body))
    with pytest.raises(IntegrityError):
        t.read()


@pytest.mark.unit
def test_inline_compaction_after_five_delta_commits(tmp_path: Path) -> None:
    t = _table(tmp_path, replace(OFF, compaction_mode="inline"))
    t.upsert(_rows([1, 2], "v0"))  # delta commit 1 (inserts)
    for k in range(1, 5):
        t.upsert(_rows([1], f"v{k}"))  # 2..5: the fifth fires Hudi's default trigger
    done = completed_compactions(t.state())
    assert len(done) == 1
    assert _values(t.read(read_optimized=True)) == {1: "v4", 2: "v0"}


@pytest.mark.unit
def test_time_triggers(tmp_path: Path) -> None:
    t = _table(
        tmp_path, replace(OFF, compaction_trigger="TIME_ELAPSED", compaction_max_delta_seconds=0)
    )
    t.upsert(_rows([1], "a"))
    assert t.maintenance.schedule_compaction(force=False) is None  # no log yet: nothing to plan
    t.upsert(_rows([1], "b"))
    assert t.maintenance.schedule_compaction(force=False) is not None
    both = replace(OFF, compaction_trigger="NUM_AND_TIME", compaction_max_delta_seconds=3600)
    t2 = _table(tmp_path / "2", both)
    for k in range(6):
        t2.upsert(_rows([1], str(k)))
    # enough commits, not enough time
    assert t2.maintenance.schedule_compaction(force=False) is None


@pytest.mark.unit
def test_plan_names_groups_and_skips_pending_ones(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1, 2], "x"))  # two partitions: two file groups
    t.upsert(_rows([1], "y"))
    first = t.maintenance.schedule_compaction()
    assert first is not None
    plan = decode_plan(t.tl.states.read(Instant(first, COMPACTION, State.REQUESTED)))
    (op,) = plan["compaction"]["operations"]
    assert set(op) >= {"file_group", "base_path", "log_paths"} and len(op["log_paths"]) == 1
    t.upsert(_rows([1, 2], "z"))
    second = t.maintenance.schedule_compaction()
    assert second is not None
    plan2 = decode_plan(t.tl.states.read(Instant(second, COMPACTION, State.REQUESTED)))
    groups = [o["file_group"] for o in plan2["compaction"]["operations"]]
    assert op["file_group"] not in groups and len(groups) == 1  # the pending one is left out
    assert sorted(t.maintenance.run_compaction()) == sorted([first, second])
    assert _values(t.read()) == {1: "z", 2: "z"}
    # id 1's "z" completed after the first plan: still in a log of the new slice
    assert _values(t.read(read_optimized=True)) == {1: "y", 2: "z"}
    t.maintenance.compact()
    assert _values(t.read(read_optimized=True)) == {1: "z", 2: "z"}


@pytest.mark.unit
def test_compaction_never_conflicts_with_delta_commits_but_delta_commits_do(
    tmp_path: Path,
) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1, 2], "x"))
    t.upsert(_rows([1], "y"))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    t.upsert(_rows([1], "after-plan"))  # completes while the compaction is pending
    assert t.maintenance.run_compaction() == [planned]
    assert _values(t.read()) == {1: "after-plan", 2: "x"}  # the log belongs to the new slice
    assert _values(t.read(read_optimized=True)) == {1: "y", 2: "x"}
    # Two delta commits updating one file group: the later one to complete conflicts.
    other = Table.open(t.store, OFF)
    with pytest.raises(CommitConflict):
        mine = KeyedWriteRequest(
            PROPS,
            "upsert",
            data=_rows([1], "mine"),
            on_plan=lambda _: other.upsert(_rows([1], "theirs")),
        )
        write_keyed(t, mine)
    assert _values(t.read())[1] == "theirs"


@pytest.mark.unit
def test_compaction_beside_writer_threads_matches_the_model(tmp_path: Path) -> None:
    """Two writer threads on disjoint keys and a thread compacting all the time: every
    delta commit lands (none conflicts with a compaction) and the table equals the model."""
    t = _table(tmp_path)
    model = KeyedModel("commit_time", "global")
    rng = random.Random(7)
    stop = threading.Event()
    lock = threading.Lock()
    times: list[str] = [t.timeline().completed().last().time]
    errors: list[BaseException] = []

    def writer(ids: list[int]) -> None:
        w = Table.open(t.store, OFF)
        for k in range(8):
            picked = rng.sample(ids, 3)
            rows = [{"id": i, "ts": k, "p": "a" if i % 2 else "b", "v": f"{k}"} for i in picked]
            with lock:  # the model's order is the completion order
                done = w.upsert(pa.Table.from_pylist(rows))
                model.upsert(rows)
                times.append(done.time)

    def compactor() -> None:
        c = Table.open(t.store, OFF)
        while not stop.is_set():
            try:
                c.maintenance.compact()
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=([1, 3, 5, 7, 9],))]
    threads.append(threading.Thread(target=writer, args=([2, 4, 6, 8, 10],)))
    comp = threading.Thread(target=compactor)
    comp.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stop.set()
    comp.join()
    assert not errors, errors
    # Compactions add steps that change no record: compare each writer step by its time.
    for step, when in enumerate(times):
        assert table_rows(t.read(as_of=when)) == model.snapshot(step, times), step
    assert table_rows(t.read()) == model.snapshot(len(times) - 1, times)
    assert len(completed_compactions(t.state())) >= 1


@pytest.mark.unit
def test_async_compaction_in_the_writing_process(tmp_path: Path) -> None:
    s = replace(OFF, compaction_mode="async", compaction_max_delta_commits=2)
    t = _table(tmp_path, s)
    t.upsert(_rows([1, 2], "a"))
    t.upsert(_rows([1], "b"))  # the second delta commit fires the trigger
    wait_async(t)
    assert len(completed_compactions(t.state())) == 1
    assert _values(t.read(read_optimized=True)) == {1: "b", 2: "a"}


@pytest.mark.unit
def test_a_plan_whose_delta_commit_was_rolled_back_is_dropped(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1], "a"))
    bad = t.upsert(_rows([1], "b"))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    t.maintenance.rollback(bad.time)
    assert t.maintenance.run_compaction() == []
    assert t.timeline().pending().empty()
    assert _values(t.read()) == {1: "a"}


@pytest.mark.unit
def test_two_executors_of_one_plan_complete_it_once(tmp_path: Path) -> None:
    """Executing a plan is idempotent: base files have names and bytes the plan fixes, the
    later completion is told the plan already completed, and nothing is deleted."""
    t = _table(tmp_path)
    t.upsert(_rows([1, 2, 3], "a"))
    t.upsert(_rows([1, 2], "b"))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    results: list[list[str]] = []

    def run(writer: str) -> None:
        results.append(
            Table.open(t.store, replace(OFF, writer_id=writer)).maintenance.run_compaction(planned)
        )

    threads = [threading.Thread(target=run, args=(w,)) for w in ("one", "two")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(len(r) for r in results) == [0, 1]
    assert completed_compactions(t.state()) == [planned]
    assert t.timeline().pending().empty()
    assert _values(t.read(read_optimized=True)) == {1: "b", 2: "b", 3: "a"} == _values(t.read())


@pytest.mark.unit
def test_a_rollback_that_leaves_the_plan_intact_does_not_stop_it(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1], "a"))
    t.upsert(_rows([1], "b"))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    late = t.upsert(_rows([1], "late"))  # after the plan: not in it
    t.maintenance.rollback(late.time)
    assert t.maintenance.run_compaction() == [planned]
    assert _values(t.read()) == {1: "b"} == _values(t.read(read_optimized=True))
