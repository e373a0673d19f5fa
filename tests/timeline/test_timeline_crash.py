"""Kill a writer (SIGKILL) at every step boundary of commit, clustering, clean, rollback,
savepoint and restore; reopen and check that the timeline is valid, no completed data is
lost and the interrupted work was rolled back or finished. Local backend and MinIO."""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from storage import ObjectStore
from tests.support.backends import Backend
from timeline import Table, TableSettings
from timeline.crash import ENV
from timeline.heartbeat import MTIME_RESOLUTION_S

FAST = TableSettings(heartbeat_interval_ms=200, heartbeat_tolerable_misses=1)
EXPIRY_WAIT = 0.4 + MTIME_RESOLUTION_S + 0.6
WRITE_STEPS = ["requested", "inflight", "before_log", "logged", "completed"]
POST_LOG = {"logged", "deleted", "undone", "completed"}

# operation -> (action, steps, is a write that is rolled back when it did not reach the log)
OPERATIONS: dict[str, tuple[str, list[str], bool]] = {
    "commit": ("commit", WRITE_STEPS, True),
    "cluster": ("replacecommit", WRITE_STEPS, True),
    "clean": ("clean", [*WRITE_STEPS[:4], "deleted", "completed"], False),
    "rollback": ("rollback", [*WRITE_STEPS[:4], "deleted", "completed"], False),
    "savepoint": ("savepoint", ["inflight", "before_log", "logged", "completed"], False),
    "restore": ("restore", [*WRITE_STEPS[:4], "deleted", "undone", "completed"], False),
}


def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids)})


def _ids(table: Table) -> list[int]:
    data = table.read()
    return sorted(data.column("id").to_pylist()) if data.num_rows else []


def _setup(op: str, table: Table) -> dict[str, Any]:
    """Build the table state the operation runs on; returns what the operation needs."""
    if op == "commit":
        table.write(_rows(0))
        return {}
    if op == "cluster":
        for k in range(3):
            table.write(_rows(k))
        return {}
    if op == "clean":
        table.write(_rows(0))
        table.write(_rows(1))
        table.maintenance.cluster()
        table.write(_rows(3))
        return {"old": sorted(_all_data(table.store) - set(table.snapshot().paths()))}
    if op == "rollback":
        table.write(_rows(0))
        txn = table.begin()
        table.store.put(txn.data_key(name="partial.parquet"), b"partial")
        txn._heartbeat.stop()  # its writer is gone
        return {"target": txn.instant_time}
    if op == "savepoint":
        first = table.write(_rows(0))
        table.write(_rows(1))
        return {"target": first.time}
    if op == "restore":
        first = table.write(_rows(0))
        table.maintenance.savepoint(first.time)
        table.write(_rows(1))
        table.write(_rows(2))
        return {"target": first.time}
    raise AssertionError(op)


def _run(op: str, table: Table, args: dict[str, Any]) -> None:
    actions: dict[str, Callable[[], object]] = {
        "commit": lambda: table.write(_rows(1)),
        "cluster": lambda: table.maintenance.cluster(),
        "clean": lambda: table.maintenance.clean(retained=1),
        "rollback": lambda: table.maintenance.rollback(args["target"]),
        "savepoint": lambda: table.maintenance.savepoint(args["target"]),
        "restore": lambda: table.maintenance.restore(args["target"]),
    }
    actions[op]()


def _child(backend: Backend, prefix: str, op: str, args: dict[str, Any], point: str) -> None:
    import os

    os.environ[ENV] = point
    _run(op, Table.open(backend.open().scoped(prefix), FAST), args)


def _all_data(store: ObjectStore) -> set[str]:
    return {o.key for o in store.list("data/")}


def _expected_ids(op: str, took_effect: bool) -> list[int]:
    return {
        "commit": [0, 1] if took_effect else [0],
        "cluster": [0, 1, 2],
        "clean": [0, 1, 3],
        "rollback": [0],
        "savepoint": [0, 1],
        "restore": [0] if took_effect else [0, 1, 2],
    }[op]


def _check(backend: Backend, op: str, step: str, prefix: str, args: dict[str, Any]) -> None:
    _, _, is_write = OPERATIONS[op]
    store = backend.open().scoped(prefix)
    table = Table.open(store, FAST)
    table.maintenance.recover()
    timeline = table.timeline()
    assert timeline.pending().empty(), f"{op}@{step}: still pending {timeline.pending()}"
    took_effect = step in POST_LOG or not is_write
    state = table.state(refresh=False)
    snap = state.snapshot()
    data = _all_data(store)
    assert set(snap.paths()) <= data, f"{op}@{step}: completed data lost"
    assert data <= set(state.all_files()), f"{op}@{step}: orphan files {data}"
    assert _ids(table) == _expected_ids(op, took_effect), f"{op}@{step}"
    if op == "cluster":
        assert len(snap.files) == (1 if took_effect else 3), f"{op}@{step}"
    if op == "clean":
        assert not set(args["old"]) & data, f"{op}@{step}: planned files not deleted"
    if op == "rollback":
        assert timeline.get(args["target"]) is None, f"{op}@{step}"
    if op == "savepoint":
        assert state.savepoints.keys() == {args["target"]}, f"{op}@{step}"
    table.write(_rows(99))  # the table keeps working
    assert 99 in _ids(table)


def test_kill_at_every_step(tbackend: Backend) -> None:
    """Every (operation, step) on its own table: set up side by side, killed side by side,
    then recovered and checked side by side (one heartbeat expiry wait for all)."""
    cases = [
        (op, step, f"tables/{op}-{step}")
        for op, (_, steps, _) in sorted(OPERATIONS.items())
        for step in steps
    ]
    with ThreadPoolExecutor(8) as pool:
        setups = list(
            pool.map(lambda c: _setup(c[0], Table.open(tbackend.open().scoped(c[2]), FAST)), cases)
        )
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["timeline", "pyarrow", "boto3", "tests.support.backends"])
    children = []
    for (op, step, prefix), args in zip(cases, setups, strict=True):
        point = f"{OPERATIONS[op][0]}.{step}"
        child = ctx.Process(target=_child, args=(tbackend, prefix, op, args, point))
        child.start()
        children.append((point, child))
    for point, child in children:
        child.join(120)
        assert child.exitcode == -signal.SIGKILL, f"{point} was never reached"

    time.sleep(EXPIRY_WAIT)  # let the dead writers' heartbeats expire
    with ThreadPoolExecutor(8) as pool:
        futures = [
            pool.submit(_check, tbackend, op, step, prefix, args)
            for (op, step, prefix), args in zip(cases, setups, strict=True)
        ]
        for f in futures:
            f.result()
