"""Provenance overhead of Spark writes (same run, same MinIO): recording a commit's events
(one indexed idempotency lookup, one synchronous journal) against the timeline commit itself
(begin, add the files, complete), for commits of 10, 100 and 1000 output files; requests per
recorded commit. "warm" is what the installed hook does on the driver (its `CommitRecorder`
keeps the repository open), "cold" opens the repository for the one commit (a new driver,
`catch_up`, the data source's commit worker).
The repository already holds the history of the previous rounds (rolled over).

    python -m bench spark_provenance [--quick] [--local-only]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections import Counter

from bench.common import BenchBackend, console, fmt_requests, local_backend, minio_backend, table
from flowledger.spark import CommitInfo, OutputFile, SparkJobInfo
from flowledger.spark.lineage import CommitRecorder, record_in_store
from provenance import ProvenanceRepository
from storage.s3a import to_spark_path
from timeline import DataFile, Table

INPUTS = 8  # files the job read


def _commit(t: Table, table_uri: str, n: int, job: SparkJobInfo, repo: str) -> CommitInfo:
    """A commit of `n` output files (metadata only: the job already wrote the data)."""
    txn = t.begin(action="commit")
    files = []
    for i in range(n):
        key = txn.data_key("", f"part-{i:05d}-{uuid.uuid4().hex[:8]}.parquet")
        txn.add(DataFile(key, 1_000_000 + i, 10_000))
        files.append(OutputFile(f"{to_spark_path(table_uri)}/{key}", 10_000, 1_000_000 + i))
    instant = txn.commit(extra_metadata={"operation": "insert"})
    return CommitInfo(table_uri, instant.time, "commit", "insert", tuple(files), job, repo)


Row = tuple[int, float, float, float, dict[str, float], dict[str, float], dict[str, float], int]


def overhead(backend: BenchBackend, sizes: list[int], rounds: int) -> list[Row]:
    """Per size: median commit, cold and warm record seconds; requests of each; events."""
    run = uuid.uuid4().hex[:6]
    table_uri = f"{backend.uri}/tables/bench-{run}"
    table_store = backend.open().scoped(f"tables/bench-{run}")
    cold_store = backend.open().scoped(f"cold-{run}")
    recorder = CommitRecorder(backend.settings)
    warm = recorder.repository(f"{backend.uri}/warm-{run}")
    t = Table.open(table_store)
    job = SparkJobInfo(
        "local-1700000000000", "bench", "flowledger.write", "bench",
        tuple(f"s3a://raw/in/{i}.csv" for i in range(INPUTS)),
    )  # fmt: skip
    out = []
    for n in sizes:
        secs: dict[str, list[float]] = {"commit": [], "cold": [], "warm": []}
        reqs: dict[str, Counter[str]] = {k: Counter() for k in secs}
        events = 0
        for _ in range(rounds):
            table_store.stats.reset()
            start = time.perf_counter()
            info = _commit(t, table_uri, n, job, f"{backend.uri}/warm-{run}")
            secs["commit"].append(time.perf_counter() - start)
            reqs["commit"].update(table_store.stats.snapshot())
            cold_store.stats.reset()
            start = time.perf_counter()
            events = record_in_store(cold_store, info)
            secs["cold"].append(time.perf_counter() - start)
            reqs["cold"].update(cold_store.stats.snapshot())
            warm.root.stats.reset()
            start = time.perf_counter()
            assert recorder.record(info) == events
            secs["warm"].append(time.perf_counter() - start)
            reqs["warm"].update(warm.root.stats.snapshot())
            assert record_in_store(cold_store, info) == 0  # idempotent (not timed)
        with ProvenanceRepository.open(cold_store, recover=False) as repo:
            repo.rollover()  # history for the next size, as a long-lived repository has
        warm.rollover()
        med = {k: statistics.median(v) for k, v in secs.items()}
        per = {k: {op: c / rounds for op, c in v.items()} for k, v in reqs.items()}
        out.append(
            (n, med["commit"], med["cold"], med["warm"], per["commit"], per["cold"], per["warm"],
             events)
        )  # fmt: skip
    recorder.close()
    return out


def _fmt(counts: dict[str, float]) -> str:
    total = sum(counts.values())
    return f"{fmt_requests({k: round(v) for k, v in counts.items() if round(v)})} ({total:.0f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.spark_provenance")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--local-only", action="store_true", help="skip MinIO")
    args = parser.parse_args(argv)
    sizes, rounds = ([10, 100], 2) if args.quick else ([10, 100, 1000], 5)
    makers = {"local": local_backend, "minio": minio_backend}
    for name, maker in makers.items():
        if args.local_only and name != "local":
            continue
        with maker() as backend:
            result = table(
                f"{name}: provenance of a Spark commit ({INPUTS} input files, median of {rounds})",
                "output files",
                "events",
                "commit ms",
                "warm ms (÷ commit)",
                "cold ms (÷ commit)",
                "commit req",
                "warm req",
                "cold req",
            )
            for n, c, cold, warm, creq, coldreq, warmreq, events in overhead(
                backend, sizes, rounds
            ):
                result.add_row(
                    str(n), str(events), f"{c * 1000:.1f}",
                    f"{warm * 1000:.1f} ({warm / c:.2f}x)", f"{cold * 1000:.1f} ({cold / c:.2f}x)",
                    _fmt(creq), _fmt(warmreq), _fmt(coldreq),
                )  # fmt: skip
            console.print(result)


if __name__ == "__main__":
    main()
