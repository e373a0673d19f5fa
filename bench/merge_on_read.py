"""Merge-on-read against copy-on-write (keyed tables, same backend, same run):

1. an upsert of random existing keys: wall time, requests, write amplification (bytes of
   data and log files written / bytes of the changed rows as Parquet);
2. snapshot read time after 1, 5 and 20 delta commits against the read-optimized read;
3. compaction throughput (rows and base bytes per second) after 20 delta commits.

`python -m bench merge_on_read [--rows N] [--keys K] [--file-mib M] [--minio]`. Small by
default: the figures in docs/benchmarks.md are small-scale runs on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from bench.common import BenchBackend, console, fmt_requests, local_backend, minio_backend, table
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties
from timeline.keyed.logfile import LOG_FILES
from timeline.parquet_io import to_parquet_bytes

MiB = 1024 * 1024


def _rows(ids: np.ndarray, version: int) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(np.full(n, version), pa.int64()),
            "day": pa.array([f"2026-01-{1 + int(i) % 4:02d}" for i in ids]),
            "amount": pa.array(np.random.default_rng(version).random(n)),
            "note": pa.array([f"row {i} v{version}" for i in ids]),
        }
    )


def _open(backend: BenchBackend, name: str, kind: str, file_mib: int) -> Table:
    settings = TableSettings(
        parquet_max_file_size=file_mib * MiB,
        small_file_limit=0,
        compaction_mode="off",
        local_entry_cache=False,
    )
    props = KeyedProperties.of(
        "id", ordering_field="ts", partition_by="day", table_type=kind, merge_mode="event_time"
    )
    return Table.create(backend.open().scoped(name), props, settings)


def _written_bytes(t: Table, time_: str) -> int:
    e = t.entry(time_)
    return sum(f.size for f in e.added) + sum(int(d["size"]) for d in e.metadata.get(LOG_FILES, ()))


@contextlib.contextmanager
def _backend(minio: bool) -> Iterator[BenchBackend]:
    if minio:
        with minio_backend() as b:
            yield b
    else:
        with local_backend() as b:
            yield b


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="bench merge_on_read")
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--keys", type=int, default=2_000, help="random keys per upsert")
    p.add_argument("--file-mib", type=int, default=2, help="parquet_max_file_size")
    p.add_argument("--minio", action="store_true", help="MinIO instead of the local FS")
    args = p.parse_args(argv or [])
    rng = random.Random(1)
    base = _rows(np.arange(args.rows), 0)
    with _backend(args.minio) as backend:
        tables = {
            k: _open(backend, k, k, args.file_mib) for k in ("copy_on_write", "merge_on_read")
        }
        for t in tables.values():
            t.upsert(base)
        files = len(tables["copy_on_write"].snapshot().files)
        console.print(
            f"{backend.name}: {args.rows} rows in {files} file groups, upserts of {args.keys} "
            "random keys"
        )
        # 1. upsert
        out = table(
            "1. upsert of random keys", "table", "wall s", "requests", "written MiB", "write amp."
        )
        keys = np.array(rng.sample(range(args.rows), args.keys))
        batch = _rows(keys, 1)
        changed = len(to_parquet_bytes(batch))
        walls = {}
        for kind, t in tables.items():
            t.store.stats.reset()
            start = time.perf_counter()
            done = t.upsert(batch)
            walls[kind] = time.perf_counter() - start
            counts = Counter(t.store.stats.snapshot())
            counts.pop("PROBE", None)
            written = _written_bytes(t, done.time)
            out.add_row(
                kind,
                f"{walls[kind]:.2f}",
                fmt_requests(counts),
                f"{written / MiB:.2f}",
                f"{written / changed:.1f}x",
            )
        console.print(out)
        console.print(
            f"merge-on-read upsert at {100 * walls['merge_on_read'] / walls['copy_on_write']:.0f}"
            f" % of copy-on-write's wall time; changed rows as Parquet: {changed / MiB:.2f} MiB"
        )
        # 2. snapshot reads against read-optimized, after 1, 5, 20 delta commits
        mor = tables["merge_on_read"]
        out = table(
            "2. merge-on-read reads",
            "delta commits",
            "snapshot s",
            "read-optimized s",
            "ratio",
            "snapshot requests",
        )
        done_deltas = 1
        for target in (1, 5, 20):
            while done_deltas < target:
                keys = np.array(rng.sample(range(args.rows), args.keys))
                mor.upsert(_rows(keys, done_deltas + 1))
                done_deltas += 1
            mor.store.stats.reset()
            start = time.perf_counter()
            snap = mor.read()
            snap_s = time.perf_counter() - start
            counts = Counter(mor.store.stats.snapshot())
            counts.pop("PROBE", None)
            start = time.perf_counter()
            mor.read(read_optimized=True)
            ro_s = time.perf_counter() - start
            assert snap.num_rows == args.rows
            out.add_row(
                str(target),
                f"{snap_s:.2f}",
                f"{ro_s:.2f}",
                f"{snap_s / ro_s:.2f}x",
                fmt_requests(counts),
            )
        console.print(out)
        # 3. compaction throughput
        start = time.perf_counter()
        done = mor.compact()
        wall = time.perf_counter() - start
        assert done is not None
        e = mor.entry(done.time)
        rows = sum(f.rows for f in e.added)
        size = sum(f.size for f in e.added)
        logs = sum(int(s.get("log_bytes", 0)) for s in e.metadata.get("write_stats", ()))
        console.print(
            f"3. compaction of {len(e.added)} file groups after 20 delta commits: {wall:.2f} s, "
            f"{rows / wall:,.0f} rows/s, {size / MiB / wall:.1f} MiB/s of base written "
            f"({logs / MiB:.2f} MiB of logs folded)"
        )


if __name__ == "__main__":
    main()
