"""Object-store benchmark: per-operation latency per backend, conditional vs plain PUT, and
streaming multipart upload vs boto3's transfer manager (same server, same run)."""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Callable

from boto3.s3.transfer import TransferConfig

from bench.common import (
    BenchBackend,
    console,
    fmt_requests,
    local_backend,
    median_ms,
    minio_backend,
    moto_backend,
    p95_ms,
    table,
    timed,
)
from storage import ObjectStore, S3ObjectStore
from storage.s3 import make_client

MiB = 1024 * 1024


class RandomStream(io.RawIOBase):
    """`size` bytes of incompressible data without holding them in memory."""

    def __init__(self, size: int) -> None:
        self._left = size
        self._block = os.urandom(MiB)

    def readable(self) -> bool:
        return True

    def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self._left, len(self._block))
        buf[:n] = self._block[:n]
        self._left -= n
        return n


def _latencies(store: ObjectStore, n: int) -> dict[str, list[float]]:
    body = os.urandom(4096)
    big = os.urandom(MiB)
    store.put("lat/big", big)
    store.put_if_absent("lat/warm", body)  # capability probe happens here, not in the samples
    store.put("lat/cas", body)
    etag = store.head("lat/cas").etag
    samples: dict[str, list[float]] = {k: [] for k in ("put", "put_if_absent", "put_if_match")}
    samples.update({k: [] for k in ("get", "ranged_get", "head", "list_page")})
    for i in range(n):  # interleaved, so drift in machine load hits every op alike
        samples["put"].append(timed(lambda i=i: store.put(f"lat/p/{i:06d}", body)))
        samples["put_if_absent"].append(
            timed(lambda i=i: store.put_if_absent(f"lat/c/{i:06d}", body))
        )
        start = time.perf_counter()
        etag = store.put_if_match("lat/cas", body, etag).etag
        samples["put_if_match"].append(time.perf_counter() - start)
        samples["get"].append(timed(lambda i=i: store.get(f"lat/p/{i:06d}")))
        offset = 4096 * (i % 200)
        samples["ranged_get"].append(timed(lambda o=offset: store.get("lat/big", o, 4096)))
        samples["head"].append(timed(lambda i=i: store.head(f"lat/p/{i:06d}")))
    for _ in range(max(5, n // 10)):
        samples["list_page"].append(timed(lambda: store.list_page("lat/p/", max_keys=1000)))
    return samples


def _ours(store: ObjectStore, size: int) -> float:
    def run() -> None:
        with store.open_writer("mp/ours") as w:
            w.write_from(RandomStream(size), chunk=MiB)

    return size / MiB / timed(run)


def _transfer_manager(backend: BenchBackend, store: S3ObjectStore, size: int) -> float:
    client = make_client(backend.settings)
    config = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB)
    key = store.prefix + "mp/boto3"
    return (
        size
        / MiB
        / timed(lambda: client.upload_fileobj(RandomStream(size), store.bucket, key, Config=config))
    )


def run_backend(backend: BenchBackend, n: int, mp_size: int) -> None:
    store = backend.open()
    samples = _latencies(store, n)
    t = table(
        f"{backend.name}: latency of {n} ops (4 KiB objects)", "op", "median ms", "p95 ms", "vs put"
    )
    base = median_ms(samples["put"])
    for op, values in samples.items():
        ratio = f"{median_ms(values) / base:.2f}x" if op.startswith("put") else ""
        t.add_row(op, f"{median_ms(values):.2f}", f"{p95_ms(values):.2f}", ratio)
    console.print(t)
    store.stats.reset()
    ours = _ours(store, mp_size)
    requests = store.stats.snapshot()
    t2 = table(
        f"{backend.name}: streaming upload of {mp_size // MiB} MiB",
        "client",
        "MiB/s",
        "ratio",
        "requests",
    )
    if isinstance(store, S3ObjectStore):
        theirs = _transfer_manager(backend, store, mp_size)
        t2.add_row("boto3 transfer manager (baseline)", f"{theirs:.0f}", "1.00x", "")
        t2.add_row(
            "flowledger open_writer", f"{ours:.0f}", f"{ours / theirs:.2f}x", fmt_requests(requests)
        )
    else:
        t2.add_row("flowledger open_writer", f"{ours:.0f}", "", fmt_requests(requests))
    console.print(t2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.objectstore")
    parser.add_argument("--quick", action="store_true", help="small run for a smoke test")
    parser.add_argument("--backends", default="local,moto,minio")
    args = parser.parse_args(argv)
    n = 40 if args.quick else 300
    mp_size = (32 if args.quick else 256) * MiB
    makers: dict[str, Callable[[], object]] = {
        "local": local_backend,
        "moto": moto_backend,
        "minio": minio_backend,
    }
    for name in args.backends.split(","):
        with makers[name]() as backend:  # type: ignore[attr-defined]
            run_backend(backend, n, mp_size)


if __name__ == "__main__":
    main()
