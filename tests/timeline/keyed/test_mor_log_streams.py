"""Log objects of format 4 (one Arrow IPC stream per object, its blocks as record batches):
tables whose logs mix the sealed-block objects of format 3 with stream objects read right
(snapshot, one slice by range, compaction, CDC); a corrupt stream object is refused, naming
it, by the whole-object and the by-range reader; a block's header must match its commit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

import timeline.keyed.log.objects as log_objects
from storage import IntegrityError, checksum_of
from tests.timeline.keyed.test_mor_tables import OFF, _rows, _table, _values
from timeline import Table
from timeline.file_groups.log_files import LOG_FILES, LogFile
from timeline.keyed.log.block import read_log
from timeline.keyed.log.stream import decode_block, decode_object
from timeline.keyed.read.slices import read_slice


def _logs(t: Table, instant: str) -> list[LogFile]:
    return [LogFile.from_json(d) for d in t.entry(instant).metadata[LOG_FILES]]


def _many_groups(tmp_path: Path) -> Table:
    """A table of several file groups per partition (every insert: new groups)."""
    t = _table(tmp_path, replace(OFF, small_file_limit=0))
    for lo in range(0, 40, 10):
        t.upsert(_rows(list(range(lo, lo + 10)), "x"))
    return t


@pytest.mark.unit
def test_a_table_with_old_and_new_log_objects_reads_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _many_groups(tmp_path)
    expected = {i: "x" for i in range(40)}
    with monkeypatch.context() as m:  # the writer of format 3: one sealed stream per block
        m.setattr(log_objects, "shares_schema", lambda parts: False)
        old = t.upsert(_rows([1, 2, 13, 24, 35], "old"))
        gone = t.delete([3, 14])
    expected |= {1: "old", 2: "old", 13: "old", 24: "old", 35: "old"}
    del expected[3], expected[14]
    new = t.upsert(_rows([2, 13, 25, 36, 40], "new", ts=2))
    t.delete([35, 4])
    expected |= {2: "new", 13: "new", 25: "new", 36: "new", 40: "new"}
    del expected[35], expected[4]
    assert {lf.head for lf in _logs(t, old.time) + _logs(t, gone.time)} == {0}
    assert all(lf.head > 0 for lf in _logs(t, new.time))
    assert len({lf.path for lf in _logs(t, new.time)}) < len(_logs(t, new.time))  # packed
    assert _values(t.read()) == expected
    by_slice: dict[int, str] = {}
    for sl in t.snapshot().merge_on_read_slices() or []:  # each slice alone: by range
        by_slice |= _values(read_slice(t.store, sl, t.schema()))
    assert by_slice == expected
    since_old = {2: "new", 13: "new", 25: "new", 36: "new", 40: "new"}
    assert _values(t.changes(old.time)) == since_old  # incremental: blocks of both formats
    cdc = {
        (r["op"], r["record_key"], (r["before"] or {}).get("v"), (r["after"] or {}).get("v"))
        for r in t.changes(old.time, cdc=True).to_pylist()
    }  # before images from format 3 blocks, after images from format 4 blocks
    assert cdc == {
        ("d", "3", "x", None),
        ("d", "14", "x", None),
        ("u", "2", "old", "new"),
        ("u", "13", "old", "new"),
        ("u", "25", "x", "new"),
        ("u", "36", "x", "new"),
        ("i", "40", None, "new"),
        ("d", "35", "old", None),
        ("d", "4", "x", None),
    }
    t.maintenance.compact()
    assert _values(t.read()) == expected == _values(t.read(read_optimized=True))


@pytest.mark.unit
def test_a_corrupt_stream_object_is_refused_naming_it(tmp_path: Path) -> None:
    t = _many_groups(tmp_path)
    done = t.upsert(_rows([1, 11, 21, 31], "y"))  # four groups of partition "a"
    logs = [lf for lf in _logs(t, done.time) if lf.partition.endswith("a")]
    assert len(logs) >= 2 and len({lf.path for lf in logs}) == 1 and logs[0].head
    path = logs[0].path
    intact = t.store.get(path)
    last = max(logs, key=lambda lf: lf.offset or 0)
    body = bytearray(intact)
    body[(last.offset or 0) + last.size - 3] ^= 0xFF  # inside the last block's frame
    t.store.put(path, bytes(body))
    with pytest.raises(IntegrityError, match=path.rsplit("/", 1)[-1]):
        t.read()  # the whole object: its checksum, before a byte is decoded
    with pytest.raises(IntegrityError, match=path.rsplit("/", 1)[-1]):
        read_log(t.store, last)  # by range: the head and the block's checksum
    first = min(logs, key=lambda lf: lf.offset or 0)
    assert read_log(t.store, first).num_rows >= 1  # the other blocks are intact
    body = bytearray(intact)
    body[10] ^= 0xFF  # inside the head, which every block read by range needs
    t.store.put(path, bytes(body))
    with pytest.raises(IntegrityError, match=path.rsplit("/", 1)[-1]):
        read_log(t.store, first)
    t.store.put(path, intact)
    with pytest.raises(IntegrityError, match="holds block"):  # another group's block
        read_log(t.store, replace(first, file_group=last.file_group))
    assert _values(t.read())[1] == "y"


@pytest.mark.unit
def test_stream_object_blocks_are_verified_against_their_commit(tmp_path: Path) -> None:
    """A block copied under another instant is refused, by range and whole."""
    t = _many_groups(tmp_path)
    done = t.upsert(_rows([1, 3], "y"))
    logs = _logs(t, done.time)
    lf = logs[0]
    with pytest.raises(IntegrityError, match="holds block"):
        read_log(t.store, replace(lf, instant="20200101000000000"))
    data = t.store.get(lf.path)
    with pytest.raises(IntegrityError, match="holds block"):
        decode_object(data, [replace(x, instant="20200101000000000") for x in logs], "where")
    rows = decode_object(data, logs, "where")
    assert sum(r.num_rows for r in rows.values()) == sum(x.rows for x in logs)
    assert pa.concat_tables(rows.values()).column("v").to_pylist() == ["y"] * 2


@pytest.mark.unit
def test_a_block_that_does_not_decompress_is_refused_naming_its_object(tmp_path: Path) -> None:
    """A frame whose bytes are no zstd frame (its checksum recorded over those bytes, as a
    faulty writer would) is an IntegrityError naming the object, whole and by range."""
    t = _many_groups(tmp_path)
    done = t.upsert(_rows([1, 11, 21, 31], "y"))
    logs = [lf for lf in _logs(t, done.time) if lf.partition.endswith("a")]
    data = t.store.get(logs[0].path)
    lf = logs[-1]
    at = (lf.offset or 0) + 8  # the frame, after its two lengths
    body = bytearray(data)
    body[at : at + 4] = b"\x00\x00\x00\x00"  # no zstd magic number
    with pytest.raises(IntegrityError, match="does not decompress"):
        decode_object(bytes(body), logs, logs[0].path)
    head, block = bytes(body[: lf.head]), bytes(body[lf.offset or 0 : (lf.offset or 0) + lf.size])
    forged = replace(lf, checksum=checksum_of(head + block))
    with pytest.raises(IntegrityError, match="does not decompress"):
        decode_block(head, block, forged, lf.path)
    assert decode_object(data, logs, "where")[lf.ref].num_rows >= 1  # the intact object
