"""A compactor in another process, compacting all the time, while this process writes delta
commits: every delta commit lands (none conflicts with a compaction), no compaction fails,
and the table equals the reference model at every writer step. Local backend and MinIO."""

from __future__ import annotations

import multiprocessing
import random
from typing import Any

import pyarrow as pa

from tests.support.backends import Backend
from tests.support.keyed_model import KeyedModel, table_rows
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties
from timeline.keyed.compaction.service import completed_compactions

PROPS = KeyedProperties.of(
    "id", ordering_field="ts", partition_by="p", merge_mode="event_time", table_type="merge_on_read"
)
OFF = TableSettings(compaction_mode="off", local_entry_cache=False)


def _compactor(backend: Backend, prefix: str, stop: Any, done: Any) -> None:
    table = Table.open(backend.open().scoped(prefix), OFF)
    n = 0
    while not stop.is_set():
        if table.maintenance.compact() is not None:
            n += 1
    done.put(n)


def test_compaction_in_another_process_beside_a_writer(tbackend: Backend) -> None:
    prefix = "tables/mor-procs"
    table = Table.create(tbackend.open().scoped(prefix), PROPS, OFF)
    model = KeyedModel("event_time", "global")
    times = [table.timeline().completed().last().time]
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["timeline", "pyarrow", "boto3", "tests.support.backends"])
    stop, done = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_compactor, args=(tbackend, prefix, stop, done))
    child.start()
    rng = random.Random(3)
    try:
        step = 0
        # Write until the compactor completed compactions among the delta commits (it starts
        # while the first ones are written), at least 12 steps.
        while step < 12 or (len(completed_compactions(table.state())) < 2 and step < 200):
            step += 1
            rows = [
                {"id": i, "ts": rng.randint(0, 3), "p": rng.choice("ab"), "v": f"s{step}"}
                for i in rng.sample(range(10), 4)
            ]
            model.upsert(rows)
            times.append(table.upsert(pa.Table.from_pylist(rows)).time)
    finally:
        stop.set()
        child.join(120)
    assert child.exitcode == 0, "the compactor failed"
    compacted = done.get(timeout=5)
    for step, when in enumerate(times):
        assert table_rows(table.read(as_of=when)) == model.snapshot(step, times), step
    assert table_rows(table.read()) == model.snapshot(len(times) - 1, times)
    assert len(completed_compactions(table.state())) == compacted >= 2
