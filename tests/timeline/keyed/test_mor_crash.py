"""Merge-on-read crash points: SIGKILL a process at every step of a delta commit and of a
compaction (schedule, inflight, each base file written, log write, completion); then every
read equals what the completed commits say, the interrupted delta commit is rolled back or
rolled forward, the interrupted compaction's plan is executed again, and the next writer
works. Local backend and MinIO."""

from __future__ import annotations

import multiprocessing
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from tests.support.backends import Backend
from timeline import Table, TableSettings
from timeline.crash import ENV
from timeline.heartbeat import MTIME_RESOLUTION_S
from timeline.keyed import KeyedProperties
from timeline.keyed.compaction.service import completed_compactions

FAST = TableSettings(heartbeat_interval_ms=200, heartbeat_tolerable_misses=1, compaction_mode="off")
EXPIRY_WAIT = 0.4 + MTIME_RESOLUTION_S + 0.6
PROPS = KeyedProperties.of("id", partition_by="p", table_type="merge_on_read")
DELTA_STEPS = ["requested", "inflight", "log_written", "before_log", "logged", "completed"]
COMPACTION_STEPS = ["requested", "inflight", "base_written", "before_log", "logged", "completed"]
POST_LOG = {"logged", "completed"}


def _rows(ids: list[int], v: str) -> pa.Table:
    return pa.table({"id": ids, "p": ["a" if i % 2 else "b" for i in ids], "v": [v] * len(ids)})


def _state(table: Table) -> dict[int, str]:
    data = table.read()
    return dict(zip(data.column("id").to_pylist(), data.column("v").to_pylist(), strict=True))


def _setup(table: Table) -> None:
    table.upsert(_rows([0, 1, 2, 3], "old"))
    table.upsert(_rows([1, 2], "mid"))  # logs in both partitions' file groups


def _child(backend: Backend, prefix: str, op: str, point: str) -> None:
    import os

    os.environ[ENV] = point
    table = Table.open(backend.open().scoped(prefix), FAST)
    if op == "deltacommit":
        table.upsert(_rows([0, 1], "new"))
    else:
        table.maintenance.compact()


BEFORE = {0: "old", 1: "mid", 2: "mid", 3: "old"}


def _check(backend: Backend, op: str, step: str, prefix: str) -> None:
    table = Table.open(backend.open().scoped(prefix), FAST)
    expected = dict(BEFORE)
    if op == "deltacommit" and step in POST_LOG:
        expected.update({0: "new", 1: "new"})
    # Before any recovery: a half-written delta commit or base file is never read.
    assert _state(table) == expected, f"{op}@{step}"
    table.maintenance.recover()
    ran = table.maintenance.run_compaction()  # the interrupted plan, executed again
    pending = table.timeline().pending()
    assert pending.empty(), f"{op}@{step}: still pending {pending}"
    assert _state(table) == expected, f"{op}@{step}"
    if op == "compaction":
        assert len(completed_compactions(table.state())) == 1, f"{op}@{step}: {ran}"
        last = table.timeline().completed().last()
        assert last is not None and last.action == "commit"  # Hudi's t.commit
        # every log was folded: the read-optimized read is the snapshot
        ro = table.read(read_optimized=True)
        assert dict(zip(ro.column("id").to_pylist(), ro.column("v").to_pylist(), strict=True)) == (
            expected
        ), f"{op}@{step}"
    table.upsert(_rows([1, 99], "next"))  # the table keeps working
    table.maintenance.compact()
    assert _state(table) == {**expected, 1: "next", 99: "next"}, f"{op}@{step}"


def test_kill_at_every_merge_on_read_step(tbackend: Backend) -> None:
    cases = [("deltacommit", s) for s in DELTA_STEPS] + [
        ("compaction", s) for s in COMPACTION_STEPS
    ]
    prefixes = {c: f"tables/{c[0]}-{c[1]}" for c in cases}

    def setup(c: tuple[str, str]) -> None:
        _setup(Table.create(tbackend.open().scoped(prefixes[c]), PROPS, FAST))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(setup, cases))
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["timeline", "pyarrow", "boto3", "tests.support.backends"])
    children: list[tuple[str, Any]] = []
    for op, step in cases:
        point = f"{op}.{step}"  # a compaction's completion steps are also `commit.<step>`
        child = ctx.Process(target=_child, args=(tbackend, prefixes[(op, step)], op, point))
        child.start()
        children.append((point, child))
    for point, child in children:
        child.join(120)
        assert child.exitcode == -signal.SIGKILL, f"{point} was never reached"
    time.sleep(EXPIRY_WAIT)  # let the dead writers' heartbeats expire
    with ThreadPoolExecutor(4) as pool:
        futures = [
            pool.submit(_check, tbackend, op, step, prefixes[(op, step)]) for op, step in cases
        ]
        for f in futures:
            f.result()
