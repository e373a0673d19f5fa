"""Merge-on-read log objects: one object per delta commit and partition, read once whole or
by block range, verified per object and per block; log files written one per file group are
still read; many slices merged at once; writers and compactions fetch each object once."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import IntegrityError
from tests.timeline.keyed.test_mor_tables import OFF, _rows, _table, _values
from timeline import Table
from timeline.file_groups.log_files import LOG_FILES, LogFile
from timeline.keyed.compaction import service as compaction_service
from timeline.keyed.keys import COMMIT_TIME_COL, RECORD_KEY_COL
from timeline.keyed.log import LogCache
from timeline.keyed.log import block as log_block
from timeline.keyed.log import objects as log_objects
from timeline.keyed.log import stream as log_stream
from timeline.keyed.log.block import OP_COL, read_log, write_log
from timeline.keyed.read.merge import UNCONDITIONAL, Rule, merge, merge_slices
from timeline.keyed.read.slices import read_slice


class _CountingGets:
    """Wraps a store's `get`: which keys a read fetched, whole or by range."""

    def __init__(self, t: Table) -> None:
        self.calls: list[tuple[str, bool]] = []
        inner = t.store.get

        def get(key: str, start: int = 0, length: int | None = None) -> bytes:
            self.calls.append((key, length is not None))
            return inner(key, start, length)

        t.store.get = get  # type: ignore[method-assign]

    def logs(self) -> list[tuple[str, bool]]:
        return [(k, ranged) for k, ranged in self.calls if k.endswith(".log")]


def _two_groups_in_one_partition(tmp_path: Path) -> Table:
    settings = replace(OFF, small_file_limit=0)  # each insert: new file groups
    t = _table(tmp_path, settings)
    t.upsert(_rows([1, 3], "x"))
    t.upsert(_rows([5, 7], "x"))
    assert len({f.group for f in t.files() if f.partition.endswith("a")}) == 2
    return t


@pytest.mark.unit
def test_one_log_object_per_partition_read_once_whole_or_by_range(tmp_path: Path) -> None:
    """A delta commit touching two file groups of one partition PUTs one object holding a
    block of each; a snapshot GETs it once, whole; one slice (a compaction's task) GETs the
    stream's head and its block's byte range (one range from the start: a small object)."""
    t = _two_groups_in_one_partition(tmp_path)
    done = t.upsert(_rows([1, 5], "y"))
    logs = [LogFile.from_json(d) for d in t.entry(done.time).metadata[LOG_FILES]]
    assert len({lf.path for lf in logs}) == 1 and len({lf.file_group for lf in logs}) == 2
    first, second = sorted(logs, key=lambda lf: lf.offset or 0)
    # one stream: its head (schema message), then the blocks back to back
    assert first.head == second.head > 0
    assert (first.offset, second.offset) == (first.head, first.head + first.size)
    assert first.object_size == second.object_size == first.head + first.size + second.size
    gets = _CountingGets(t)
    assert _values(t.read()) == {1: "y", 3: "x", 5: "y", 7: "x"}
    assert gets.logs() == [(logs[0].path, False)]
    gets.calls.clear()
    (sl,) = [s for s in t.snapshot().merge_on_read_slices() or [] if s.group == logs[1].file_group]
    assert read_slice(t.store, sl, t.schema()).num_rows == 2
    assert gets.logs() == [(logs[1].path, True)]  # the stream's head and the block


@pytest.mark.unit
def test_a_corrupt_block_of_a_log_object_fails_both_readers(tmp_path: Path) -> None:
    t = _two_groups_in_one_partition(tmp_path)
    done = t.upsert(_rows([1, 5], "y"))
    logs = [LogFile.from_json(d) for d in t.entry(done.time).metadata[LOG_FILES]]
    second = max(logs, key=lambda lf: lf.offset or 0)
    body = bytearray(t.store.get(second.path))
    body[(second.offset or 0) + 5] ^= 0xFF
    t.store.put(second.path, bytes(body))
    with pytest.raises(IntegrityError):
        t.read()  # the whole object: its checksum
    with pytest.raises(IntegrityError):
        read_log(t.store, second)  # the block's range: the block's checksum
    first = min(logs, key=lambda lf: lf.offset or 0)
    assert read_log(t.store, first).num_rows == 1  # the other block's bytes are intact


@pytest.mark.unit
def test_log_files_of_one_object_per_file_group_are_still_read(tmp_path: Path) -> None:
    """Logs written one object per file group (no offset recorded) read as before, beside
    log objects of later delta commits."""
    t = _two_groups_in_one_partition(tmp_path)
    files = t.files()
    holds = {
        sl.group: read_slice(t.store, sl, t.schema()).column("id").to_pylist()
        for sl in t.snapshot().merge_on_read_slices() or []
    }
    txn = t.begin("deltacommit", operation="upsert")
    txn.schema = t.schema()
    raw = []
    for key in (1, 5):
        (g,) = [g for g, ids in holds.items() if key in ids]
        rows = t.read().filter(pa.compute.equal(pa.compute.field("id"), key))
        rows = rows.set_column(rows.schema.get_field_index("v"), "v", pa.array(["old"]))
        rows = rows.append_column(OP_COL, pa.array(["U"]))
        part = next(f.partition for f in files if f.group == g)
        lf = write_log(
            t.store,
            txn.data_key(part, f".{g}_{txn.instant_time}.log.0"),
            rows.drop_columns([COMMIT_TIME_COL]).append_column(
                COMMIT_TIME_COL, pa.array([txn.instant_time])
            ),
            instant=txn.instant_time,
            file_group=g,
            partition=part,
        )
        assert lf.offset is None
        raw.append(lf.to_json())
    txn.commit(details={LOG_FILES: raw, "write_stats": []})
    t.upsert(_rows([3], "new"))
    assert _values(t.read()) == {1: "old", 3: "new", 5: "old", 7: "x"}
    t.maintenance.compact()
    assert _values(t.read()) == {1: "old", 3: "new", 5: "old", 7: "x"}


@pytest.mark.unit
def test_merging_many_slices_at_once_equals_merging_each() -> None:
    """`merge_slices` keys a record by its slice: the same key in two slices (a key that
    moved between groups) is merged in each, and the output keeps each slice's order."""
    rng = random.Random(7)
    slices = []
    for g in range(6):
        keys = rng.sample(range(30), 12)
        base = pa.table(
            {
                RECORD_KEY_COL: [str(k) for k in keys],
                "ts": [rng.randint(0, 5) for _ in keys],
                "v": [f"b{g}"] * len(keys),
            }
        )
        logs, rules = [], []
        for j in range(rng.randint(0, 3)):
            lk = [rng.randrange(40) for _ in range(rng.randint(0, 8))]
            logs.append(
                pa.table(
                    {
                        RECORD_KEY_COL: [str(k) for k in lk],
                        "ts": [rng.randint(0, 5) for _ in lk],
                        "v": [f"l{g}.{j}"] * len(lk),
                        OP_COL: [rng.choice("UUD") for _ in lk],
                    }
                )
            )
            rules.append(Rule("ts", rng.random() < 0.5) if g % 2 else UNCONDITIONAL)
        slices.append((base, logs, rules))
    each = pa.concat_tables([merge(b, lg, r) for b, lg, r in slices])
    assert merge_slices(slices).equals(each)


@pytest.mark.unit
def test_a_writer_reading_candidate_slices_gets_each_log_object_once(tmp_path: Path) -> None:
    """Keys the index cannot place unread (here: global keys moving to another partition)
    have their candidate slices read; the log object those slices share is one GET."""
    t = _two_groups_in_one_partition(tmp_path)
    t.upsert(_rows([1, 5], "y"))  # one log object, a block in each group of "a"
    gets = _CountingGets(t)
    moved = pa.table({"id": [1, 5], "ts": [2, 2], "p": ["b", "b"], "v": ["moved", "moved"]})
    t.upsert(moved)
    assert len(gets.logs()) == 1
    assert _values(t.read()) == {1: "moved", 3: "x", 5: "moved", 7: "x"}
    parts = {r["id"]: r["p"] for r in t.read().to_pylist()}
    assert (parts[1], parts[5]) == ("b", "b")


@pytest.mark.unit
def test_a_compaction_gets_each_log_object_of_its_plan_once(tmp_path: Path) -> None:
    t = _two_groups_in_one_partition(tmp_path)
    t.upsert(_rows([1, 5], "y"))
    t.upsert(_rows([3, 7], "z"))  # two objects, each with a block of both groups
    gets = _CountingGets(t)
    assert t.maintenance.compact() is not None
    assert len(gets.logs()) == len({k for k, _ in gets.logs()}) == 2
    assert _values(t.read()) == {1: "y", 3: "z", 5: "y", 7: "z"}


@pytest.mark.unit
def test_a_compaction_decodes_each_log_object_of_its_plan_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compaction's log cache decodes the wanted blocks of an object it fetched whole in
    one pass (one stream), not block by block."""
    t = _two_groups_in_one_partition(tmp_path)
    t.upsert(_rows([1, 5], "y"))
    t.upsert(_rows([3, 7], "z"))  # two objects, each with a block of both groups
    decoded: list[int] = []
    whole = log_stream.decode_object

    def counted(data: bytes, logs: Any, where: str) -> Any:
        decoded.append(len(logs))
        return whole(data, logs, where)

    monkeypatch.setattr(log_objects, "decode_object", counted)
    monkeypatch.setattr(log_stream, "decode_block", _refused)
    monkeypatch.setattr(log_block, "decode_block", _refused)
    assert t.maintenance.compact() is not None
    assert decoded == [2, 2]
    assert _values(t.read()) == {1: "y", 3: "z", 5: "y", 7: "z"}


def _refused(*args: Any) -> Any:
    raise AssertionError("a block decoded alone")


@pytest.mark.unit
def test_single_blocks_of_one_object_read_by_range_get_its_head_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks ending far into their object are read as the head and the block's range; a
    reader's log cache keeps the head it verified with a block, so the object's other blocks
    cost one GET each (three ranged GETs for two blocks, not four). A corrupt block is
    still refused, and a reader without the head reads it again."""
    t = _two_groups_in_one_partition(tmp_path)
    done = t.upsert(_rows([1, 5], "y"))
    first, second = sorted(
        (LogFile.from_json(d) for d in t.entry(done.time).metadata[LOG_FILES]),
        key=lambda lf: lf.offset or 0,
    )
    monkeypatch.setattr(log_block, "ONE_GET_UP_TO", 0)  # every block "far" into its object
    cache = LogCache(t.store, [first, second], whole=False)
    gets = _CountingGets(t)
    assert cache.read(first).num_rows == 1
    assert gets.logs() == [(first.path, True)] * 2  # the head, then the block
    assert cache.read(second).num_rows == 1
    assert gets.logs() == [(first.path, True)] * 3  # the second block alone
    assert read_log(t.store, second).num_rows == 1
    assert gets.logs() == [(first.path, True)] * 5  # no cache: head and block
    body = bytearray(t.store.get(second.path))
    body[(second.offset or 0) + 5] ^= 0xFF
    t.store.put(second.path, bytes(body))
    with pytest.raises(IntegrityError):
        cache.read(second)


@pytest.mark.unit
def test_a_compaction_over_its_cache_limit_gets_each_head_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan whose logs do not fit the cache reads each block by range, and each log
    object's head once: two objects of two far blocks each are six GETs, not eight."""
    t = _two_groups_in_one_partition(tmp_path)
    t.upsert(_rows([1, 5], "y"))
    t.upsert(_rows([3, 7], "z"))  # two objects, each with a block of both groups
    monkeypatch.setattr(compaction_service, "CACHED_LOGS", 0)
    monkeypatch.setattr(log_block, "ONE_GET_UP_TO", 0)
    gets = _CountingGets(t)
    assert t.maintenance.compact() is not None
    assert all(ranged for _, ranged in gets.logs()) and len(gets.logs()) == 6
    assert _values(t.read()) == {1: "y", 3: "z", 5: "y", 7: "z"}
