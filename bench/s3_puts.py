"""Plain PUTs through obstore against botocore (the baseline), on one MinIO in the same run.

The store's `put` with `fast_puts` on (obstore, storage/s3_puts.py) and off (botocore), in
alternating rounds, for the object sizes a keyed write PUTs: a bloom filter sidecar (~100 KiB),
a data file (~2 MiB) and an object of one part (8 MiB, the largest that goes through obstore).
CPU is the process's (every thread, obstore's runtime included); requests are the store's
counts, one PUT per object either way. Then what it does to a keyed table's load (the upsert
benchmark's rows, `bench/upsert_data.py`, inserted in ten commits as streams, a data file and a
bloom filter sidecar PUT per partition and commit): fresh tables, `fast_puts` on and off in
alternating rounds in one process.

`python -m bench s3_puts [--quick] [--puts N] [--rounds N] [--load-rows N]`
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

import numpy as np
import pyarrow as pa

from bench.common import BenchBackend, console, minio_backend, table
from bench.upsert_data import rows_for
from storage import S3ObjectStore, open_store

KiB, MiB = 1024, 1024 * 1024
SIZES = ((100 * KiB, "bloom sidecar"), (2 * MiB, "data file"), (8 * MiB, "one part"))


def _round(store: S3ObjectStore, data: bytes, puts: int, tag: str) -> tuple[float, float, int]:
    """(CPU ms per PUT, wall ms per PUT, requests) of `puts` PUTs of `data`."""
    store.put(f"{tag}/warm", data)
    store.stats.reset()
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(puts):
        store.put(f"{tag}/{i}", data)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return 1000 * cpu / puts, 1000 * wall / puts, sum(store.stats.snapshot().values())


def _load(be: BenchBackend, loads: list[pa.Table], fast: bool, tag: str) -> tuple[float, ...]:
    """(wall s, CPU s, PUTs) of loading a fresh keyed table from `loads`, one commit each."""
    from timeline import Table
    from timeline.keyed import KeyedProperties

    store = open_store(f"s3://bench/{tag}", dataclasses.replace(be.settings, fast_puts=fast))
    props = KeyedProperties.of("id", ordering_field="ts", partition_by="part")
    t = Table.create(store, props)
    c0, w0 = time.process_time(), time.perf_counter()
    for data in loads:
        t.insert(data.to_reader())
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return wall, cpu, store.stats.snapshot().get("PUT", 0)


def _load_table(be: BenchBackend, rows: int, rounds: int) -> None:
    rng = np.random.default_rng(20)
    per = rows // 10
    loads = [
        rows_for(np.arange(lo, lo + per, dtype=np.int64), 1, 20, rng) for lo in range(0, rows, per)
    ]
    got: dict[bool, list[tuple[float, ...]]] = {True: [], False: []}
    for r in range(rounds):
        for fast in (True, False):
            got[fast].append(_load(be, loads, fast, f"load-{r}-{fast}"))
    t = table(
        f"Keyed load of {rows:,} rows in 10 commits: median of {rounds} alternating rounds",
        "PUTs through",
        "wall s",
        "CPU s",
        "vs botocore (wall / CPU)",
        "PUTs",
    )
    med = {f: [statistics.median(x[i] for x in v) for i in range(3)] for f, v in got.items()}
    for fast, name in ((False, "botocore (baseline)"), (True, "obstore")):
        w, c, puts = med[fast]
        ratio = f"{w / med[False][0]:.2f}x / {c / med[False][1]:.2f}x"
        t.add_row(name, f"{w:.2f}", f"{c:.2f}", ratio, f"{puts:.0f}")
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench s3_puts", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="20 PUTs per size, 2 rounds")
    ap.add_argument("--puts", type=int, default=100, help="PUTs per size and round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--load-rows", type=int, default=10_000_000, help="0: no load")
    args = ap.parse_args(argv)
    puts, rounds = (20, 2) if args.quick else (args.puts, args.rounds)
    load_rows = 500_000 if args.quick else args.load_rows
    t = table(
        f"Plain PUTs on MinIO: median of {rounds} rounds of {puts} (load "
        f"{os.getloadavg()[0]:.1f} at the start)",
        "object",
        "botocore CPU ms",
        "obstore CPU ms",
        "CPU ratio",
        "botocore wall ms",
        "obstore wall ms",
        "wall ratio",
        "requests per PUT (obstore / botocore)",
    )
    with minio_backend("bench") as be:
        stores = {
            fast: open_store(f"s3://bench/{fast}", dataclasses.replace(be.settings, fast_puts=fast))
            for fast in (True, False)
        }
        for size, name in SIZES:
            data = os.urandom(size)
            got: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
            for r in range(rounds):
                for fast, store in stores.items():
                    assert isinstance(store, S3ObjectStore)
                    got[fast].append(_round(store, data, puts, f"{size}/{r}"))
            cpu = {f: statistics.median(x[0] for x in v) for f, v in got.items()}
            wall = {f: statistics.median(x[1] for x in v) for f, v in got.items()}
            reqs = {f: v[-1][2] / puts for f, v in got.items()}
            t.add_row(
                f"{name} ({size // KiB:,} KiB)",
                f"{cpu[False]:.2f}",
                f"{cpu[True]:.2f}",
                f"{cpu[True] / cpu[False]:.2f}x",
                f"{wall[False]:.2f}",
                f"{wall[True]:.2f}",
                f"{wall[True] / wall[False]:.2f}x",
                f"{reqs[True]:.0f} / {reqs[False]:.0f}",
            )
        console.print(t)
        if load_rows:
            _load_table(be, load_rows, max(1, rounds - 2))


if __name__ == "__main__":
    main()
