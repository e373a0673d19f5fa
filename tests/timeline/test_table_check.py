"""`check_table`: a table that broke in use (the fixture), a deleted and a corrupted data
file, a phantom pending compaction, a damaged record index and a key held twice, each found
in one line, and the repairs that need no guess (and the refusals of the others)."""

from __future__ import annotations

import json
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import open_store
from timeline import Table, TableSettings, check_table
from timeline.archive import Archiver
from timeline.check_report import ProblemKind
from timeline.instant import COMMIT, COMPACTION, Instant, State
from timeline.keyed import KeyedProperties, build_index
from timeline.keyed.index.record_index import put_shard
from timeline.layout import instant_key, log_key
from timeline.metadata import DataFile, Entry
from timeline.settings import ArchivalSettings

pytestmark = pytest.mark.unit

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mor-table-unreadable.tar.gz"
SETTINGS = TableSettings(
    small_file_limit=0,
    parquet_max_file_size=3000,  # several file groups
    local_entry_cache=False,
    archival=ArchivalSettings(auto_archive=False),
)

#: Compactions only when a test asks for one.
MOR_SETTINGS = replace(SETTINGS, compaction_mode="off")


def _rows(ids: range | list[int], v: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "p": ["a" if i % 2 else "b" for i in ids], "v": [v] * len(ids)})


def _cow(tmp_path: Path) -> Table:
    t = Table.create(
        open_store(str(tmp_path / "t")), KeyedProperties.of("id", partition_by="p"), SETTINGS
    )
    t.upsert(_rows(range(100)))
    t.upsert(_rows(range(50, 150), "y"))
    return t


def _local(t: Table, path: str) -> Path:
    return Path(t.store.url(path).removeprefix("file://"))


def _kinds(report: Any) -> list[str]:
    return [p.kind for p in report.problems]


def test_a_healthy_table_has_no_problems(tmp_path: Path) -> None:
    t = _cow(tmp_path)
    report = check_table(t)
    assert report.problems == () and report.ok
    assert report.files_checked >= len(t.snapshot().files) > 1


def test_the_unreadable_merge_on_read_table_names_its_missing_base_file(tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    report = check_table(open_store(str(tmp_path / "mor-table-unreadable")))
    missing = [p for p in report.problems if p.kind == ProblemKind.MISSING]
    assert missing, report.problems
    assert any(
        "data/20261129001636349/p=a/" in p.subject and "the latest snapshot reads it" in p.message
        for p in missing
    ), missing
    assert not report.ok
    repaired = check_table(open_store(str(tmp_path / "mor-table-unreadable")), repair=True)
    refusals = [r for r in repaired.repairs if r.problem.kind == ProblemKind.MISSING]
    assert refusals and not any(r.done for r in refusals)
    assert "restore it from a backup" in refusals[0].message


def test_a_deleted_data_file_is_named(tmp_path: Path) -> None:
    t = _cow(tmp_path)
    gone = t.snapshot().files[0]
    _local(t, gone.path).unlink()
    report = check_table(open_store(t.uri))
    assert _kinds(report) == [ProblemKind.MISSING]
    assert report.problems[0].subject == t.store.url(gone.path)
    assert "\n" not in report.problems[0].message


def test_a_corrupted_data_file_fails_its_checksum(tmp_path: Path) -> None:
    t = _cow(tmp_path)
    f = t.snapshot().files[1]
    local = _local(t, f.path)
    body = bytearray(local.read_bytes())
    body[len(body) // 2] ^= 0xFF  # same size, one byte flipped
    local.write_bytes(bytes(body))
    report = check_table(t)
    assert ProblemKind.DAMAGED in _kinds(report)
    damaged = next(p for p in report.problems if p.kind == ProblemKind.DAMAGED)
    assert damaged.subject == t.store.url(f.path) and "checksum" in damaged.message


def _mor(tmp_path: Path) -> Table:
    props = KeyedProperties.of("id", partition_by="p", table_type="merge_on_read")
    t = Table.create(open_store(str(tmp_path / "m")), props, MOR_SETTINGS)
    t.upsert(_rows(range(40)))
    t.upsert(_rows(range(10), "y"))
    return t


def test_keys_a_merge_on_read_log_deletes_leave_the_record_index_consistent(
    tmp_path: Path,
) -> None:
    """A delta commit writes no index delta: the groups its logs change are no longer the
    index's to speak for, so a key deleted in a log is not a disagreement."""
    t = _mor(tmp_path)
    build_index(t)
    t.delete(_rows([3, 4]).select(["id", "p"]))
    t.upsert(_rows([7, 200], "z"))
    assert 3 not in t.read().column("id").to_pylist()
    assert check_table(t).problems == ()
    build_index(t)  # merged: the groups with logs are read merged with their logs
    assert check_table(t).problems == ()
    build_index(t, from_files=True)
    assert check_table(t).problems == ()


def test_a_phantom_pending_compaction_is_found_and_removed(tmp_path: Path) -> None:
    t = _mor(tmp_path)
    done = t.maintenance.compact()
    assert done is not None
    pending_states = {
        s: t.store.get(instant_key(Instant(done.time, COMPACTION, s)))
        for s in (State.REQUESTED, State.INFLIGHT)
    }
    for k in range(8):
        t.upsert(_rows(range(k, k + 3), f"z{k}"))
    Archiver(t, ArchivalSettings(keep_min_commits=3, keep_max_commits=4)).run()
    t.refresh()
    assert t.timeline().completed().get(done.time, COMMIT) is None  # archived
    # What archival used to leave behind: the compaction's requested and inflight objects.
    for s, body in pending_states.items():
        key = instant_key(Instant(done.time, COMPACTION, s))
        if not _local(t, key).exists():
            t.store.put(key, body)
    t.refresh()
    assert list(t.timeline().pending()) == []  # an archived completion is never pending
    report = check_table(open_store(t.uri))
    assert _kinds(report) == [ProblemKind.PHANTOM_PENDING]
    assert report.problems[0].subject == done.time and "archived" in report.problems[0].message
    fixed = check_table(open_store(t.uri), repair=True)
    assert [r.done for r in fixed.repairs] == [True] and fixed.ok
    again = Table.open(open_store(t.uri), MOR_SETTINGS)
    assert list(again.timeline().pending()) == []
    assert check_table(again).problems == ()
    before = again.read().sort_by("id").to_pylist()
    assert again.maintenance.compact() is not None  # its file groups are planned again
    assert again.read().sort_by("id").to_pylist() == before


def _indexed(tmp_path: Path) -> tuple[Table, Entry]:
    t = _cow(tmp_path)
    built = build_index(t)
    return t, t.entry(built.time)


def test_a_damaged_record_index_is_found_bypassed_by_writes_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t, entry = _indexed(tmp_path)
    shard = entry.metadata["record_index"]["shards"][0]["path"]
    local = _local(t, shard)
    local.write_bytes(local.read_bytes()[:-10] + b"0123456789")
    report = check_table(open_store(t.uri))
    assert _kinds(report) == [ProblemKind.RECORD_INDEX]
    assert t.store.url(shard) in report.problems[0].message

    # A write does not fail on a damaged derived index: it finds its keys without it.
    fresh = Table.open(open_store(t.uri), SETTINGS)
    with caplog.at_level("WARNING"):
        fresh.upsert(_rows([1, 2, 149, 500], "after"))
    assert any(
        "record index" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records
    )
    rows = {r["id"]: r["v"] for r in fresh.read().to_pylist()}
    assert len(rows) == 151 and rows[1] == rows[149] == rows[500] == "after"
    assert rows[3] == "x" and rows[60] == "y"

    fixed = check_table(open_store(t.uri), repair=True)
    assert [r.problem.kind for r in fixed.repairs] == [ProblemKind.RECORD_INDEX]
    assert fixed.repairs[0].done and "rebuilt" in fixed.repairs[0].message
    assert check_table(open_store(t.uri)).problems == ()


def test_a_record_index_that_disagrees_with_the_files_is_rebuilt(tmp_path: Path) -> None:
    t, entry = _indexed(tmp_path)
    ref = entry.metadata["record_index"]["shards"][0]
    # A shard that verifies but names the wrong group for every key: written as the index
    # writes its shards, then named in place of the real one.
    real = pq.read_table(_local(t, ref["path"]))
    wrong = real.set_column(2, "file_group", pa.array(["nowhere"] * real.num_rows, pa.string()))
    bad = put_shard(t.store, ref["path"] + ".bad", wrong, 8)
    shards = [dict(s) for s in entry.metadata["record_index"]["shards"]]
    shards[0] = bad.to_json()
    _rewrite_entry(
        t,
        entry,
        {**entry.metadata, "record_index": {**entry.metadata["record_index"], "shards": shards}},
    )
    report = check_table(open_store(t.uri))
    assert (
        _kinds(report) == [ProblemKind.RECORD_INDEX]
        and "disagrees with the files" in report.problems[0].message
    )
    assert check_table(open_store(t.uri), repair=True).ok
    assert check_table(open_store(t.uri)).problems == ()


def _rewrite_entry(t: Table, e: Entry, metadata: dict[str, Any]) -> None:
    """Replace a completed instant's body in the commit log and its completed object (what
    a faulty writer could have committed)."""
    body = Entry(e.seq, e.time, e.action, e.writer, metadata).encode()
    done = Instant(e.time, e.action, State.COMPLETED, e.seq)
    for key in (instant_key(done), log_key(e.seq)):
        _local(t, key).write_bytes(body)


def test_a_key_held_by_two_file_groups_is_named_and_not_repaired(tmp_path: Path) -> None:
    t = _cow(tmp_path)
    files = t.snapshot().files
    src = files[0]
    copy_path = src.path.replace(".parquet", "-copy.parquet")
    shutil.copyfile(_local(t, src.path), _local(t, copy_path).parent / Path(copy_path).name)
    twin = DataFile.from_json({**src.to_json(), "path": copy_path, "file_group": "twin-group"})
    last = t.entry(t.snapshot().instant_time)
    added = [*last.metadata["added"], twin.to_json()]
    _rewrite_entry(t, last, {**last.metadata, "added": added})
    report = check_table(open_store(t.uri))
    dups = [p for p in report.problems if p.kind == ProblemKind.DUPLICATE_KEY]
    assert dups and "twin-group" in dups[0].message
    refused = check_table(open_store(t.uri), repair=True)
    assert not refused.ok
    assert all(not r.done for r in refused.repairs)
    assert "without guessing" in refused.repairs[0].message


def test_the_report_is_json(tmp_path: Path) -> None:
    t = _cow(tmp_path)
    _local(t, t.snapshot().files[0].path).unlink()
    doc = check_table(t).to_json()
    assert json.loads(json.dumps(doc))["ok"] is False
    assert doc["problems"][0]["kind"] == ProblemKind.MISSING


def test_a_damaged_bloom_sidecar_is_rebuilt_as_it_was_written(tmp_path: Path) -> None:
    big = TableSettings(local_entry_cache=False)  # one file: its filter is a sidecar
    t = Table.create(open_store(str(tmp_path / "b")), KeyedProperties.of("id"), big)
    t.upsert(pa.table({"id": [f"k{i}" for i in range(6000)], "v": ["x"] * 6000}))
    stats = t.entry(t.snapshot().instant_time).metadata["write_stats"]
    path = next(s["bloom_path"] for s in stats if s.get("bloom_path"))
    local = _local(t, path)
    written = local.read_bytes()
    local.write_bytes(written[:-4] + b"XXXX")
    report = check_table(open_store(t.uri))
    assert _kinds(report) == [ProblemKind.BLOOM_SIDECAR] and report.problems[
        0
    ].subject == t.store.url(path)
    fixed = check_table(open_store(t.uri), repair=True)
    assert fixed.ok and fixed.repairs[0].done, fixed.repairs
    assert local.read_bytes() == written
    local.unlink()
    assert check_table(open_store(t.uri), repair=True).ok and local.read_bytes() == written
