"""Keyed writers in separate processes: upserts into disjoint file groups both land; into
one file group exactly one wins and the other gets a CommitConflict naming it, then lands on
retry. A SIGKILLed upsert leaves the snapshot as it was and is rolled back by the next writer."""

from __future__ import annotations

import multiprocessing
import signal
import time
from typing import Any

import pyarrow as pa
import pytest

from tests.support.backends import LOCAL_AND_MINIO, Backend, make_backend
from timeline import CommitConflict, Table, TableSettings
from timeline.crash import ENV
from timeline.heartbeat import MTIME_RESOLUTION_S
from timeline.instant import ROLLBACK
from timeline.keyed import KeyedProperties
from timeline.keyed.write import KeyedWriteRequest, write_keyed
from timeline.layout import data_prefix

PROPS = KeyedProperties.of("id", ordering_field="ts", merge_mode="event_time")
FAST = TableSettings(
    heartbeat_interval_ms=200,
    heartbeat_tolerable_misses=1,
    small_file_limit=0,
    local_entry_cache=False,
)
EXPIRY_WAIT = 0.4 + MTIME_RESOLUTION_S + 0.6


@pytest.fixture(params=LOCAL_AND_MINIO)
def kbackend(request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    return make_backend(request, tmp_path, request.param)


def _rows(ids: list[int], ts: int, v: str) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [v] * len(ids)})


def _setup(backend: Backend) -> Table:
    t = Table.create(backend.open(), PROPS, FAST)
    t.upsert(_rows(list(range(10)), 0, "init"))  # file group A: keys 0..9
    t.upsert(_rows(list(range(10, 20)), 0, "init"))  # file group B: keys 10..19
    return t


def _first(backend: Backend, ids: list[int], planned: Any, other_done: Any, out: Any) -> None:
    """Plans an upsert, lets the other process commit, then completes (retrying once)."""
    t = Table.open(backend.open(), FAST)
    props = t.properties
    assert props is not None

    def hold(_plan: Any) -> None:
        planned.set()
        assert other_done.wait(60)

    try:
        req = KeyedWriteRequest(props, "upsert", data=_rows(ids, 1, "first"), on_plan=hold)
        done = write_keyed(t, req)
        out.put(("first", "ok", done.time))
    except CommitConflict as exc:
        out.put(("first", "conflict", exc.winner))
        out.put(("first", "retry", t.upsert(_rows(ids, 1, "first")).time))


def _second(backend: Backend, ids: list[int], planned: Any, done_evt: Any, out: Any) -> None:
    assert planned.wait(60)
    t = Table.open(backend.open(), FAST)
    out.put(("second", "ok", t.upsert(_rows(ids, 1, "second")).time))
    done_evt.set()


def _race(backend: Backend, first_ids: list[int], second_ids: list[int]) -> list[tuple[str, ...]]:
    ctx = multiprocessing.get_context("spawn")
    planned, second_done, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_first, args=(backend, first_ids, planned, second_done, out)),
        ctx.Process(target=_second, args=(backend, second_ids, planned, second_done, out)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = []
    while not out.empty():
        results.append(out.get())
    return results


def _values(t: Table) -> dict[int, str]:
    return {r["id"]: r["v"] for r in t.read().to_pylist()}


def test_disjoint_file_groups_both_land(kbackend: Backend) -> None:
    t = _setup(kbackend)
    results = _race(kbackend, [1, 2], [11, 12])
    assert sorted(r[:2] for r in results) == [("first", "ok"), ("second", "ok")]
    values = _values(t)
    assert [values[k] for k in (1, 2, 11, 12)] == ["first", "first", "second", "second"]
    assert len(t.files()) == 2  # still two file groups, each with a new slice


def test_overlapping_file_groups_one_wins_and_the_retry_lands(kbackend: Backend) -> None:
    t = _setup(kbackend)
    results = _race(kbackend, [1, 2], [2, 3])
    by = {(r[0], r[1]): r[2] for r in results}
    assert set(by) == {("first", "conflict"), ("first", "retry"), ("second", "ok")}
    assert by[("first", "conflict")] == by[("second", "ok")]  # the winner is named
    values = _values(t)
    assert [values[k] for k in (1, 2, 3)] == ["first", "first", "second"]
    assert len(t.read().to_pylist()) == 20  # no record lost or duplicated


def _killed_upsert(backend: Backend) -> None:
    import os

    os.environ[ENV] = "commit.before_log"  # data files written, completion not taken
    t = Table.open(backend.open(), FAST)
    t.upsert(_rows([1, 15, 99], 7, "killed"))


def test_killed_upsert_leaves_the_snapshot_and_is_rolled_back(kbackend: Backend) -> None:
    t = _setup(kbackend)
    before = t.read().sort_by("id")
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_killed_upsert, args=(kbackend,))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    reader = Table.open(kbackend.open(), FAST)
    (pending,) = reader.timeline().pending()
    assert list(reader.store.list(data_prefix(pending.time)))  # its slices were written...
    assert reader.read().sort_by("id").equals(before)  # ...and nobody reads them
    time.sleep(EXPIRY_WAIT)  # its heartbeat expires
    writer = Table.open(kbackend.open(), FAST)
    writer.upsert(_rows([1], 8, "next"))  # the next writer rolls the dead one back first
    timeline = writer.timeline()
    assert timeline.get(pending.time) is None
    rollbacks = [writer.entry(i.time) for i in timeline.completed().actions(ROLLBACK)]
    assert [e.target for e in rollbacks] == [pending.time]
    assert not list(writer.store.list(data_prefix(pending.time)))
    values = _values(writer)
    assert values[1] == "next" and values[15] == "init" and 99 not in values
