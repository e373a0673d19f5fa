"""Demo of the timeline: commits, concurrent writers without locks, time travel,
replacecommit, clustering, savepoint/restore and clean, with request counts."""

from __future__ import annotations

import threading
import time
import uuid

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

from storage import ObjectStore
from timeline import CommitConflict, DataFile, Table, checksummed, to_parquet_bytes


def _race(store: ObjectStore, writers: int, group: str | None) -> list[str]:
    """`writers` threads commit at once; with a shared file group only one may win."""
    barrier = threading.Barrier(writers)
    outcome: list[str] = []

    def write(w: int) -> None:
        table = Table.open(store)
        txn = table.begin()
        key = txn.data_key(f"day=w{w}", "part.parquet")
        body = to_parquet_bytes(pa.table({"id": [100 + w], "day": [f"w{w}"]}))
        store.put(key, body)
        txn.add(checksummed(DataFile(key, len(body), 1, f"day=w{w}", group or ""), body))
        barrier.wait()
        try:
            outcome.append(f"completed {txn.commit().time}")
        except CommitConflict as exc:
            outcome.append(f"conflict: lost to {exc.winner}")

    threads = [
        threading.Thread(target=write, args=(w,), name=f"flowledger-demo-writer-{w}")
        for w in range(writers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome


def demo_timeline(store: ObjectStore, console: Console) -> None:
    console.rule("[bold]Timeline: ACID instants with conditional writes (Hudi-style)")
    root = store.scoped(f"demo/timeline-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}")
    table = Table.open(root)
    first = table.write(
        pa.table({"id": [1, 2, 3], "day": ["mon", "mon", "tue"]}), partition_by="day"
    )
    root.stats.reset()
    second = table.write(pa.table({"id": [4], "day": ["tue"]}), partition_by="day")
    console.print(
        f"commit {second.time}: requests {root.stats.snapshot()} "
        "(1 data file + requested, inflight, log position, completed; 1 short LIST)"
    )
    disjoint = _race(root, 4, None)
    console.print(
        f"4 writers into disjoint file groups: {sum('completed' in o for o in disjoint)} completed"
    )
    hot = _race(root, 4, "hot")
    console.print(f"4 writers into one file group: {sorted(hot)}")

    table.maintenance.savepoint(second.time)
    over = table.write(pa.table({"id": [9], "day": ["mon"]}), mode="overwrite", partition_by="day")
    console.print(f"insert_overwrite of day=mon as replacecommit {over.time}")
    clustered = table.maintenance.cluster()
    console.print(f"clustering small files: {clustered}")

    out = RichTable("instant time", "action", "state", "completion")
    for i in table.timeline():
        out.add_row(i.time, i.action, i.state.value, str(i.seq or ""))
    console.print(out)
    console.print(
        f"rows now: {table.snapshot().rows}; as of {first.time}: "
        f"{table.snapshot(as_of=first.time).rows}"
    )
    restored = table.maintenance.restore(second.time)
    console.print(
        f"restore to savepoint {second.time} ({restored.time}): rows "
        f"{table.snapshot().rows}, ids {sorted(table.read().column('id').to_pylist())}"
    )
    cleaned = table.maintenance.clean(retained=1)
    console.print(f"clean: {cleaned or 'nothing to clean (savepointed files are kept)'}")
