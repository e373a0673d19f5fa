"""Shared helpers for benchmarks: backends on real servers, timing, tables."""

from __future__ import annotations

import contextlib
import logging
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from storage import ObjectStore, StoreSettings, open_store

console = Console(width=110)
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request log lines


def fmt_requests(counts: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items()))


@dataclass(frozen=True)
class BenchBackend:
    name: str
    uri: str
    settings: StoreSettings

    def open(self) -> ObjectStore:
        return open_store(self.uri, self.settings)


@contextlib.contextmanager
def minio_backend(bucket: str = "bench") -> Iterator[BenchBackend]:
    from infra import minio

    with tempfile.TemporaryDirectory(prefix="flowledger-bench-minio-") as tmp:
        server = minio.start(Path(tmp), buckets=[bucket])
        try:
            settings = StoreSettings(
                endpoint_url=server.endpoint,
                access_key_id=server.access_key,
                secret_access_key=server.secret_key,
                region=server.region,
            )
            yield BenchBackend("minio", f"s3://{bucket}/bench", settings)
        finally:
            minio.stop(server)


@contextlib.contextmanager
def moto_backend(bucket: str = "bench") -> Iterator[BenchBackend]:
    import boto3
    from moto.server import ThreadedMotoServer

    # Port 0: the server binds and we read its port back (no probe-then-bind race).
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    try:
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=bucket)
        settings = StoreSettings(
            endpoint_url=endpoint, access_key_id="testing", secret_access_key="testing"
        )
        yield BenchBackend("moto", f"s3://{bucket}/bench", settings)
    finally:
        server.stop()


@contextlib.contextmanager
def local_backend() -> Iterator[BenchBackend]:
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-local-") as tmp:
        yield BenchBackend("local", "file://" + tmp, StoreSettings())


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def p95_ms(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(len(samples) * 0.95) - 1)] * 1000


def table(title: str, *columns: str) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, justify="right" if c != columns[0] else "left")
    return t


def before_tree(args: list[str]) -> Path | None:
    """`--before DIR`: an export of older code (e.g. `git archive REV`) to run side by side."""
    return Path(args[args.index("--before") + 1]) if "--before" in args else None


def code_trees(before: Path | None) -> list[tuple[str, Path]]:
    """The code versions a benchmark compares: ("before", DIR) when given, then this tree."""
    here = Path(__file__).resolve().parents[1]
    return ([("before", before)] if before else []) + [("after", here)]
