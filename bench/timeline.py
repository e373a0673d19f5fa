"""Timeline benchmark (same run, same servers):

1. object requests per commit on the happy path (goal: 4 or fewer PUTs);
2. commit latency as a ratio to (requests x median single PUT latency) measured in the same
   run (goal <= 1.3x);
3. timeline load time vs number of active instants: LIST-only load of the timeline vs a full
   snapshot load (LIST + one GET per completed instant, what a cold reader pays);
4. aggregate commits/s with 1, 2, 4, 8 concurrent non-conflicting writer processes on MinIO
   (goal >= 100 commits/s with 8; Hudi's lock-based instant-time generator allows ~5/s).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import BenchBackend, console, fmt_requests, local_backend, minio_backend, table
from storage import ObjectStore
from timeline import DataFile, Table
from timeline.instant import COMMIT, Instant, InstantTimeGenerator, State
from timeline.layout import instant_key, log_key
from timeline.metadata import Entry, write_metadata


def _commit(table_: Table, partition: str) -> None:
    txn = table_.begin()
    key = txn.data_key(partition, f"{uuid.uuid4().hex}.bin")
    table_.store.put(key, b"x")
    txn.add(DataFile(key, 1, 1, partition))
    txn.commit()


def _put_latency(store: ObjectStore, n: int) -> float:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        store.put_if_absent(f"bench-put/{uuid.uuid4().hex}-{i}", b"{}")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def commit_costs(backend: BenchBackend, n: int) -> tuple[dict[str, float], float, float]:
    """Requests per commit (data PUT excluded), median commit latency, median PUT latency."""
    store = backend.open().scoped(f"tables/costs-{uuid.uuid4().hex[:6]}")
    t = Table.open(store)
    _commit(t, "")  # warm up
    put_lat = _put_latency(store, n)
    latencies = []
    store.stats.reset()
    for _ in range(n):
        start = time.perf_counter()
        txn = t.begin()
        began = time.perf_counter()
        key = txn.data_key("", f"{uuid.uuid4().hex}.bin")
        store.put(key, b"x")  # the data file: not part of the commit's cost
        txn.add(DataFile(key, 1, 1))
        committing = time.perf_counter()
        txn.commit()
        latencies.append((began - start) + (time.perf_counter() - committing))
    counts = Counter(store.stats.snapshot())
    counts.pop("PROBE", None)  # answered from the per-process capability cache
    counts["PUT"] -= n  # the data files
    per = {k: v / n for k, v in counts.items()}
    return per, statistics.median(latencies), put_lat


def _fabricate(store: ObjectStore, count: int) -> None:
    """`count` completed commits written directly (faster than committing them one by one)."""
    gen = InstantTimeGenerator()
    times = [gen.new() for _ in range(count)]

    def one(k: int) -> None:
        t = times[k]
        files = [DataFile(f"data/{t}/f.bin", 1, 1)]
        e = Entry(k + 1, t, COMMIT, "bench", write_metadata("insert", files))
        store.put(instant_key(Instant(t, COMMIT, State.REQUESTED)), b"{}")
        store.put(instant_key(Instant(t, COMMIT, State.INFLIGHT)), b"{}")
        store.put(log_key(k + 1), e.encode())
        store.put(instant_key(Instant(t, COMMIT, State.COMPLETED, k + 1)), e.encode())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(count)))


def load_times(backend: BenchBackend, sizes: list[int]) -> list[tuple[int, float, float, str, str]]:
    out = []
    for n in sizes:
        store = backend.open().scoped(f"tables/load-{n}-{uuid.uuid4().hex[:6]}")
        _fabricate(store, n)
        store.stats.reset()
        start = time.perf_counter()
        tl = Table(store).timeline()
        list_only = time.perf_counter() - start
        assert len(tl) == n
        list_counts = fmt_requests(store.stats.snapshot())
        store.stats.reset()
        start = time.perf_counter()
        snap = Table(store).snapshot()
        full = time.perf_counter() - start
        assert len(snap.files) == n
        out.append((n, list_only, full, list_counts, fmt_requests(store.stats.snapshot())))
    return out


def _writer(args: tuple[BenchBackend, str, int, int, float]) -> tuple[float, float]:
    backend, prefix, w, commits, start_at = args
    t = Table.open(backend.open().scoped(prefix))
    _commit(t, f"warmup-{w}")  # imports, connections, capability probe: before the start line
    time.sleep(max(0.0, start_at - time.time()))
    begin = time.time()
    for _ in range(commits):
        _commit(t, f"w{w}")
    return begin, time.time()


def throughput(backend: BenchBackend, writers: list[int], commits: int) -> list[tuple[int, float]]:
    ctx = multiprocessing.get_context("spawn")
    out = []
    with ctx.Pool(max(writers)) as pool:
        pool.map(abs, range(max(writers)))  # start every process before timing
        for n in writers:
            prefix = f"tables/tput-{n}-{uuid.uuid4().hex[:6]}"
            Table.open(backend.open().scoped(prefix))
            start_at = time.time() + 4.0
            spans = pool.map(_writer, [(backend, prefix, w, commits, start_at) for w in range(n)])
            wall = max(e for _, e in spans) - min(b for b, _ in spans)
            out.append((n, n * commits / wall))  # warm-up commits are not counted
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.timeline")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args(argv)
    samples = 10 if args.quick else 60
    sizes = [10, 100] if args.quick else [10, 100, 1000, 3000]
    commits = 5 if args.quick else 25

    costs = table(
        "Commit cost (single writer, warm table; data file PUT excluded)",
        "backend", "requests/commit", "PUTs", "median commit ms", "median PUT ms",
        "ratio to requests x PUT",
    )  # fmt: skip
    results: dict[str, Any] = {}
    with minio_backend() as minio, local_backend() as local:
        for backend in (local, minio):
            per, commit_lat, put_lat = commit_costs(backend, samples)
            total = sum(per.values())
            ratio = commit_lat / (total * put_lat)
            results[backend.name] = (per, commit_lat, put_lat, ratio)
            costs.add_row(
                backend.name,
                f"{total:.2f} ({' '.join(f'{k}={v:.2f}' for k, v in sorted(per.items()))})",
                f"{per.get('PUT', 0):.2f}",
                f"{commit_lat * 1000:.1f}",
                f"{put_lat * 1000:.2f}",
                f"{ratio:.2f}x",
            )
        console.print(costs)

        loads = table(
            "Load time vs active instants (MinIO): LIST-only timeline vs cold snapshot",
            "instants", "timeline (LIST only) ms", "requests", "cold snapshot ms", "requests",
        )  # fmt: skip
        for n, list_only, full, lc, fc in load_times(minio, sizes):
            loads.add_row(str(n), f"{list_only * 1000:.1f}", lc, f"{full * 1000:.1f}", fc)
        console.print(loads)

        tput = table(
            "Aggregate commits/s, non-conflicting writer processes (MinIO)",
            "writers", "commits/s", "vs 1 writer", "vs Hudi lock-based time generator (~5/s)",
        )  # fmt: skip
        rows = throughput(minio, [1, 2, 4, 8], commits)
        one = rows[0][1]
        for n, rate in rows:
            tput.add_row(str(n), f"{rate:.1f}", f"{rate / one:.2f}x", f"{rate / 5:.1f}x")
        console.print(tput)


if __name__ == "__main__":
    main()
