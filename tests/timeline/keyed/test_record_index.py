"""The record-level index: the `indexing` action (plan, build, catch-up, complete), deltas
kept by every keyed commit and merged past a threshold, lookups that read no base file for
new keys, the fallback for writes that left no delta, a run SIGKILLed at every step and
rerun (local backend and MinIO), and `flowledger timeline index`."""

from __future__ import annotations

import json
import multiprocessing
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from storage import open_store
from tests.support.backends import Backend
from timeline import Table, TableSettings
from timeline import crash as crash_mod
from timeline.crash import ENV
from timeline.file_groups.sidecars import WRITE_STATS
from timeline.instant import INDEXING
from timeline.keyed import KeyedProperties, build_index, index_view
from timeline.keyed.index.indexing import merge_if_due
from timeline.keyed.index.record_index import RecordLevelIndex, apply_delta, read_shard
from timeline.parquet_io import read_files

PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="p")
SETTINGS = TableSettings(
    small_file_limit=0,
    parquet_max_file_size=3000,  # several file groups per partition
    local_entry_cache=False,
    record_index_shard_keys=40,
    record_index_row_group_keys=8,
    heartbeat_interval_ms=200,
    heartbeat_tolerable_misses=1,
)
STEPS = [
    "requested",
    "inflight",
    "built",
    "caught_up",
    "shards_written",
    "before_log",
    "logged",
    "completed",
]


def _rows(ids: range | list[int], ts: int = 0, v: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "p": ["a" if i % 2 else "b" for i in ids],
            "v": [v] * len(ids),
        }
    )


def _table(store: Any) -> Table:
    t = Table.create(store, PROPS, SETTINGS)
    for k in range(3):
        t.upsert(_rows(range(k * 50, k * 50 + 50)))
    return t


def _truth(t: Table) -> dict[str, str]:
    """key -> file group, from the snapshot's files."""
    out: dict[str, str] = {}
    for f in t.snapshot().files:
        data = read_files(t.store, [f], ["_flowledger_record_key"])
        for k in data.column(0).to_pylist() if data is not None else []:
            out[k] = f.group
    return out


def _index(t: Table) -> tuple[dict[str, str], frozenset[str]]:
    """key -> file group from the index's shards and deltas; and its untracked groups."""
    view = index_view(t.state())
    assert view is not None
    parts = [read_shard(t.store, s)[0] for s in view.shards]
    mapping = pa.concat_tables(parts)
    for d in view.deltas:
        mapping = apply_delta(mapping, read_shard(t.store, d)[0], PROPS)
    got = dict(
        zip(
            mapping.column("key").to_pylist(), mapping.column("file_group").to_pylist(), strict=True
        )
    )
    return got, view.untracked


def _agrees(t: Table) -> None:
    """The index names every key's file group, except groups it knows it does not track."""
    truth = _truth(t)
    got, untracked = _index(t)
    live = {f.group for f in t.snapshot().files}
    expect = {k: g for k, g in truth.items() if g not in untracked}
    assert {k: g for k, g in got.items() if g in live and g not in untracked} == expect


def _ids(t: Table) -> list[int]:
    return sorted(t.read().column("id").to_pylist())


@pytest.mark.unit
def test_build_then_commits_keep_it_current(tmp_path: Path) -> None:
    t = _table(open_store("file://" + str(tmp_path / "t")))
    done = build_index(t)
    assert done.action == INDEXING
    meta = t.entry(done.time).metadata["record_index"]
    assert meta["keys"] == 150 and len(meta["shards"]) == 4  # 40 keys a shard
    _agrees(t)
    # New keys only: the index says no file holds them, so no base file is read (ranges
    # and blooms would read the files whose range covers them).
    new = t.upsert(_rows(range(1000, 1010)))
    assert t.entry(new.time).metadata["keyed"]["files_read"] == 0
    assert t.entry(new.time).metadata["record_index_delta"]["rows"] == 10
    # Updates read only the groups holding the keys; a key moved to the other partition
    # and deleted keys are written to the delta too.
    moved = _rows([3], ts=1)
    moved = moved.set_column(2, "p", pa.array(["b"]))
    t.upsert(moved)
    t.delete([5, 6, 1000])
    _agrees(t)
    assert 3 in _ids(t) and 5 not in _ids(t)
    got, _ = _index(t)
    assert "5" not in got and "1000" not in got
    # Merging: a new run starts from the index (its shards and deltas), not the files.
    again = build_index(t)
    meta = t.entry(again.time).metadata["record_index"]
    assert meta["source"] == done.time and meta["keys"] == 150 + 10 - 3
    assert index_view(t.state()).deltas == ()  # type: ignore[union-attr]
    _agrees(t)


@pytest.mark.unit
def test_deltas_past_the_threshold_are_merged(tmp_path: Path) -> None:
    store = open_store("file://" + str(tmp_path / "t"))
    t = _table(store)
    t = Table.open(store, TableSettings(**{**SETTINGS.__dict__, "record_index_max_deltas": 2}))
    build_index(t)
    t.upsert(_rows([500]))
    assert len(index_view(t.state()).deltas) == 1  # type: ignore[union-attr]
    t.upsert(_rows([501]))  # the second delta: the commit merges them
    view = index_view(t.state())
    assert view is not None and view.deltas == ()
    assert merge_if_due(t) is None
    _agrees(t)


@pytest.mark.unit
def test_writes_without_delta_fall_back_to_ranges_and_blooms(tmp_path: Path) -> None:
    t = _table(open_store("file://" + str(tmp_path / "t")))
    first = build_index(t)
    t.maintenance.cluster()  # a replacecommit: new groups, no delta
    view = index_view(t.state())
    assert view is not None and view.untracked
    # Every key is still found exactly once: an upsert of all of them updates, not inserts.
    t.upsert(_rows(range(150), ts=1, v="y"))
    assert _ids(t) == list(range(150))
    assert set(t.read().column("v").to_pylist()) == {"y"}
    # A rollback of a commit the index covers makes it stale: ranges and blooms answer.
    t2 = _table(open_store("file://" + str(tmp_path / "t2")))
    last = t2.timeline().completed().last()
    assert last is not None
    build_index(t2)
    t2.maintenance.rollback(last.time)
    assert index_view(t2.state()) is None
    t2.upsert(_rows(range(100, 150), ts=2))  # re-inserts what the rollback removed
    assert _ids(t2) == list(range(150))
    assert first.time != last.time


@pytest.mark.unit
def test_upserts_while_indexing_are_caught_up(tmp_path: Path, monkeypatch: Any) -> None:
    """Commits that complete after the plan (before the catch-up) are in the index; commits
    after the catch-up are found as untracked groups until the next run."""
    t = _table(open_store("file://" + str(tmp_path / "t")))
    other = Table.open(t.store, SETTINGS)
    real = crash_mod.point

    def during(name: str) -> None:
        if name == "indexing.built":
            other.upsert(_rows(range(200, 220)))  # caught up
            other.delete([10, 11])
        if name == "indexing.shards_written":
            other.upsert(_rows(range(300, 305)))  # after the catch-up: untracked
        real(name)

    monkeypatch.setattr(crash_mod, "point", during)
    done = build_index(t)
    monkeypatch.setattr(crash_mod, "point", real)
    meta = t.entry(done.time).metadata["record_index"]
    assert meta["keys"] == 150 + 20 - 2
    view = index_view(t.state())
    assert view is not None and len(view.untracked) >= 1
    _agrees(t)
    # Lookups through the index see all of them: upserting them again updates in place.
    t.upsert(_rows([*range(200, 220), *range(300, 305), 0], ts=5, v="z"))
    ids = _ids(t)
    assert len(ids) == len(set(ids)) == 150 + 20 - 2 + 5
    _agrees(t)


@pytest.mark.unit
def test_index_lookup_reads_only_matching_blocks(tmp_path: Path) -> None:
    t = _table(open_store("file://" + str(tmp_path / "t")))
    build_index(t)
    view = index_view(t.state())
    assert view is not None
    from timeline.keyed.index.ranges import range_bloom_index

    st = t.state()
    idx = RecordLevelIndex(t.store, view, PROPS, range_bloom_index(t.store, st, PROPS))
    found = idx.lookup(pa.array(["7"], pa.string()))
    assert found.column("key").to_pylist() == ["7"]
    assert idx.shards_read == 1 and idx.blocks_read == 1  # one shard, one row group of it


def _child(backend: Backend, prefix: str, point: str) -> None:
    import os

    os.environ[ENV] = point
    build_index(Table.open(backend.open().scoped(prefix), SETTINGS))


def test_indexing_killed_at_every_step_and_rerun(tbackend: Backend) -> None:
    """SIGKILL at each step; a commit lands while it is dead; the next run finishes (or
    finds finished) the same instant, and the index agrees with the table."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["timeline", "pyarrow", "boto3", "tests.support.backends"])
    tables = {s: _table(tbackend.open().scoped(f"rli/{s}")) for s in STEPS}
    children = []
    for step in STEPS:
        child = ctx.Process(target=_child, args=(tbackend, f"rli/{step}", f"indexing.{step}"))
        child.start()
        children.append((step, child))
    for step, child in children:
        child.join(120)
        assert child.exitcode == -signal.SIGKILL, f"indexing.{step} was never reached"
    for step, t in tables.items():
        t = Table.open(t.store, SETTINGS)
        t.upsert(_rows(range(140, 160), ts=1))  # while the index run is dead
        pending = [i for i in t.timeline().pending() if i.action == INDEXING]
        done = build_index(t)
        if pending:
            assert done.time == pending[0].time, step  # the interrupted plan, resumed
        timeline = t.timeline()
        assert timeline.pending().empty(), f"{step}: {timeline.pending()}"
        runs = [i for i in timeline.completed() if i.action == INDEXING]
        if step in ("logged", "completed"):  # it had completed: the rerun merges into it
            assert len(runs) == 2, step
            assert t.entry(done.time).metadata["record_index"]["source"] == runs[0].time
        else:
            assert len(runs) == 1, step
        _agrees(t)
        t.upsert(_rows(range(150, 170), ts=2))
        ids = _ids(t)
        assert ids == list(range(170)), step
        _agrees(t)


@pytest.mark.unit
def test_timeline_index_command(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _table(open_store("file://" + uri))
    result = CliRunner().invoke(app, ["timeline", "index", "--table", uri, "--json"])
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    assert done["action"] == "indexing" and done["state"] == "completed"
    refused = CliRunner().invoke(app, ["timeline", "index", "--table", str(tmp_path / "none")])
    assert refused.exit_code != 0


@pytest.mark.unit
def test_two_runs_of_one_plan_race(tmp_path: Path, monkeypatch: Any) -> None:
    """A rerun resumes a run that is still alive and completes first: the slower run finds
    the instant completed and leaves the winner's shards in place."""
    t = _table(open_store("file://" + str(tmp_path / "t")))
    rerun = Table.open(t.store, SETTINGS)
    real = crash_mod.point
    raced: list[str] = []

    def race(name: str) -> None:
        if name == "indexing.shards_written" and not raced:
            raced.append("")  # once: the rerun passes here too
            raced[0] = build_index(rerun).time  # resumes the same pending instant
        real(name)

    monkeypatch.setattr(crash_mod, "point", race)
    done = build_index(t)
    monkeypatch.setattr(crash_mod, "point", real)
    assert raced == [done.time]
    assert len([i for i in t.timeline().completed() if i.action == INDEXING]) == 1
    _agrees(t)  # every shard still there, checksums verified


@pytest.mark.unit
@pytest.mark.parametrize("damage", ["corrupt", "delete"])
def test_a_damaged_index_never_refuses_a_write(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The index is derived data: a write whose shard is missing or fails its checksum
    finds its keys through ranges and blooms, warning once and naming the object; the next
    merge of the index rebuilds it from the files."""
    t = _table(open_store("file://" + str(tmp_path / "t")))
    done = build_index(t)
    shards = t.entry(done.time).metadata["record_index"]["shards"]
    for s in shards:
        local = tmp_path / "t" / s["path"]
        if damage == "delete":
            local.unlink()
        else:
            local.write_bytes(local.read_bytes()[:-4] + b"XXXX")
    with caplog.at_level("WARNING"):
        t.upsert(_rows([1, 2, 77, 149, 900], ts=1, v="new"))
    warned = [r.getMessage() for r in caplog.records if "record index" in r.getMessage()]
    assert len(warned) == 1 and shards[0]["path"] in warned[0]
    rows = {r["id"]: r["v"] for r in t.read().to_pylist()}
    assert len(rows) == 151 and [rows[i] for i in (1, 2, 77, 149, 900)] == ["new"] * 5
    assert rows[3] == "x"
    rebuilt = build_index(t)  # the merge of a damaged index starts from the files
    assert t.entry(rebuilt.time).metadata["record_index"]["keys"] == 151
    _agrees(t)


@pytest.mark.unit
def test_a_streamed_insert_keeps_the_index_current(tmp_path: Path) -> None:
    t = _table(open_store("file://" + str(tmp_path / "t")))
    build_index(t)
    rows = _rows(range(2000, 2100))
    done = t.insert(pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches(30)))
    assert t.entry(done.time).metadata["record_index_delta"]["rows"] == 100
    _agrees(t)
    assert set(range(2000, 2100)) <= set(_ids(t))


@pytest.mark.unit
def test_a_streamed_insert_that_fills_small_files_keeps_the_index_current(
    tmp_path: Path,
) -> None:
    # The filled files hold their old rows first (copied), then the stream's new records.
    settings = replace(
        SETTINGS, small_file_limit=100_000, parquet_max_file_size=200_000,
        small_file_rewrite_ratio=float("inf"),
    )  # fmt: skip
    t = Table.create(open_store("file://" + str(tmp_path / "t")), PROPS, settings)
    t.upsert(_rows(range(0, 100)))
    build_index(t)
    rows = _rows(range(100, 400))
    done = t.insert(pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches(40)))
    meta = t.entry(done.time).metadata
    assert sum(s["prev_commit"] is not None for s in meta[WRITE_STATS]) == 2  # both filled
    assert meta["record_index_delta"]["rows"] == 300  # the new records only
    _agrees(t)
    # The index leads an upsert of old and new keys of the filled files to their rows.
    t.upsert(_rows(range(50, 150), ts=1, v="y"))
    got = {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}
    assert got == {i: "y" if 50 <= i < 150 else "x" for i in range(400)}
    _agrees(t)
