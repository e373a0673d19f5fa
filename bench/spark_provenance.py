"""Provenance overhead of Spark writes (same run, same MinIO): recording a commit's events
(`flowledger.spark.record_commit`: open the repository, one indexed idempotency lookup, one
synchronous journal) against the timeline commit itself (begin, add the files, complete), for
commits of 10, 100 and 1000 output files; requests per recorded commit. The repository already
holds the history of the previous rounds (rolled over), as a long-lived one would.

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
from flowledger.spark.lineage import record_in_store
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


def overhead(
    backend: BenchBackend, sizes: list[int], rounds: int
) -> list[tuple[int, float, float, dict[str, float], dict[str, float], int]]:
    """Per size: median commit s, median record s, requests per commit and per recording."""
    run = uuid.uuid4().hex[:6]
    table_uri = f"{backend.uri}/tables/bench-{run}"
    repo_uri = f"{backend.uri}/repo-{run}"
    table_store = backend.open().scoped(f"tables/bench-{run}")
    repo_store = backend.open().scoped(f"repo-{run}")
    t = Table.open(table_store)
    job = SparkJobInfo(
        "local-1700000000000", "bench", "flowledger.write", "bench",
        tuple(f"s3a://raw/in/{i}.csv" for i in range(INPUTS)),
    )  # fmt: skip
    out = []
    for n in sizes:
        commit_s, record_s, events = [], [], 0
        commit_req: Counter[str] = Counter()
        record_req: Counter[str] = Counter()
        for _ in range(rounds):
            table_store.stats.reset()
            start = time.perf_counter()
            info = _commit(t, table_uri, n, job, repo_uri)
            commit_s.append(time.perf_counter() - start)
            commit_req.update(table_store.stats.snapshot())
            repo_store.stats.reset()
            start = time.perf_counter()
            events = record_in_store(repo_store, info)
            record_s.append(time.perf_counter() - start)
            record_req.update(repo_store.stats.snapshot())
            assert record_in_store(repo_store, info) == 0  # idempotent (not timed)
        with ProvenanceRepository(repo_store, recover=False) as repo:
            repo.rollover()  # history for the next size, as a long-lived repository has
        per = {k: v / rounds for k, v in commit_req.items()}
        per_rec = {k: v / rounds for k, v in record_req.items()}
        out.append(
            (n, statistics.median(commit_s), statistics.median(record_s), per, per_rec, events)
        )
    return out


def _fmt(counts: dict[str, float]) -> str:
    return fmt_requests({k: round(v) for k, v in counts.items()})


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
                "record ms",
                "record/commit",
                "commit requests",
                "record requests",
            )
            for n, c, r, creq, rreq, events in overhead(backend, sizes, rounds):
                result.add_row(
                    str(n), str(events), f"{c * 1000:.1f}", f"{r * 1000:.1f}", f"{r / c:.2f}x",
                    f"{_fmt(creq)} ({sum(creq.values()):.0f})",
                    f"{_fmt(rreq)} ({sum(rreq.values()):.0f})",
                )  # fmt: skip
            console.print(result)


if __name__ == "__main__":
    main()
