"""Content repository benchmark on MinIO, against baselines measured in the same run:

1. 100,000 contents of 1 KiB: packed resource claims vs one object per content (PUTs, rate).
2. A 1 GiB content streamed in and out vs boto3's transfer manager, with peak RSS growth
   (VmHWM of a fresh subprocess, so the parent's peak does not count).
3. Random small-content reads: p50 latency vs a single GET of a 1 KiB object.

`python -m bench.content [--quick]`
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import BenchBackend, console, fmt_requests, median_ms, minio_backend, table
from storage import ObjectStore
from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings

KiB, MiB = 1024, 1024 * 1024
THREADS = 8
SETTINGS = ContentRepositorySettings(archive_cleanup_frequency=0, cleanup_on_start=False)
# Uploads of large contents: more, smaller parts in flight in the same memory
# (5 MiB x (8 + 1) = 45 MiB) - the transfer manager runs 10 threads.
STREAM_STORE: dict[str, object] = {"multipart_size": 5 * MiB, "fast_upload_active_blocks": 8}
# Reads: as many ranged GETs in flight as the transfer manager's threads, in 4 MiB parts.
STREAM_REPO: dict[str, object] = {"read_part_size": 4 * MiB, "read_ahead_parts": 10}


def _puts(counts: dict[str, int]) -> int:
    return sum(v for k, v in counts.items() if k.startswith("PUT") or k == "MPU_PART")


def _requests(counts: dict[str, int]) -> dict[str, int]:
    # PROBE counts look-ups of the cached capability probe, not requests sent.
    return {k: v for k, v in counts.items() if k != "PROBE"}


def _baseline_small(store: ObjectStore, bodies: list[bytes]) -> tuple[float, dict[str, int]]:
    store.stats.reset()
    start = time.perf_counter()
    with ThreadPoolExecutor(THREADS * 2) as pool:
        list(pool.map(lambda i: store.put(f"naive/{i:07d}", bodies[i]), range(len(bodies))))
    return time.perf_counter() - start, store.stats.snapshot()


def _ours_small(
    repo: ContentRepository, store: ObjectStore, bodies: list[bytes], per_session: int
) -> tuple[float, dict[str, int], list[ContentClaim]]:
    store.stats.reset()
    claims: list[ContentClaim | None] = [None] * len(bodies)

    def worker(t: int) -> None:
        mine = range(t, len(bodies), THREADS)
        session = repo.session()
        for n, i in enumerate(mine, 1):
            claims[i] = session.write_bytes(bodies[i])
            if n % per_session == 0:
                session.commit()  # a processor commits its session every ~1 MiB of content
        session.commit()

    start = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(worker, range(THREADS)))
    elapsed = time.perf_counter() - start
    return elapsed, store.stats.snapshot(), [c for c in claims if c is not None]


def _read_latencies(
    repo: ContentRepository, store: ObjectStore, claims: list[ContentClaim], n: int
) -> tuple[list[float], list[float]]:
    rnd = random.Random(7)
    ours, single = [], []
    for _ in range(n):  # interleaved so machine noise hits both alike
        c = rnd.choice(claims)
        key = f"naive/{rnd.randrange(len(claims)):07d}"
        t0 = time.perf_counter()
        repo.read_bytes(c)
        t1 = time.perf_counter()
        store.get(key)
        t2 = time.perf_counter()
        ours.append(t1 - t0)
        single.append(t2 - t1)
    return ours, single


_STREAM_SCRIPT = r"""
import io, json, os, pickle, sys, time
sys.path.insert(0, os.getcwd())
backend, size, mode, overrides, repo_overrides = pickle.loads(bytes.fromhex(sys.argv[1]))
MiB = 1024 * 1024

class RandomStream(io.RawIOBase):
    # `size` incompressible bytes, seekable (so boto3 can read parts in parallel).
    def __init__(self, size):
        self.size, self.pos, self.block = size, 0, os.urandom(MiB)
    def readable(self):
        return True
    def seekable(self):
        return True
    def tell(self):
        return self.pos
    def seek(self, pos, whence=0):
        self.pos = {0: pos, 1: self.pos + pos, 2: self.size + pos}[whence]
        return self.pos
    def readinto(self, buf):
        n = done = min(len(buf), self.size - self.pos)
        view = memoryview(buf)
        while done:  # fill the whole buffer: boto3 takes a short read as the end of a part
            start = self.pos % MiB
            k = min(done, MiB - start)
            view[n - done : n - done + k] = self.block[start : start + k]
            self.pos += k
            done -= k
        return n

class Sink(io.RawIOBase):
    # Discards bytes; seekable, so boto3 downloads ranges in parallel (its best case).
    pos = 0
    def writable(self):
        return True
    def seekable(self):
        return True
    def tell(self):
        return self.pos
    def seek(self, pos, whence=0):
        self.pos = pos if whence == 0 else self.pos + pos
        return self.pos
    def write(self, b):
        self.pos += len(b)
        return len(b)

def rss(field):
    text = open("/proc/self/status").read()
    return int(text.split(field + ":")[1].split()[0]) * 1024

if overrides:
    from dataclasses import replace
    from storage import open_store
    store = open_store(backend.uri, replace(backend.settings, **overrides))
else:
    store = backend.open()
store.exists("warm-up")
if mode == "ours":
    from storage.content import ContentRepository, ContentRepositorySettings
    repo = ContentRepository(store.scoped("stream"), ContentRepositorySettings(
        archive_cleanup_frequency=0, cleanup_on_start=False, **repo_overrides)).initialize()
    repo.write_bytes(b"warm-up")
    repo.commit()
    before = rss("VmRSS")
    store.stats.reset()
    t0 = time.perf_counter()
    claim = repo.import_from(RandomStream(size))
    repo.commit()
    t1 = time.perf_counter()
    peak_in = rss("VmHWM")
    n = repo.export_to(claim, Sink())
    t2 = time.perf_counter()
    assert n == size
else:
    from boto3.s3.transfer import TransferConfig
    from storage.s3 import make_client
    client = make_client(backend.settings)
    config = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB)
    key = store.prefix + "stream/boto3"
    client.head_bucket(Bucket=store.bucket)
    before = rss("VmRSS")
    t0 = time.perf_counter()
    client.upload_fileobj(RandomStream(size), store.bucket, key, Config=config)
    t1 = time.perf_counter()
    peak_in = rss("VmHWM")
    client.download_fileobj(store.bucket, key, Sink(), Config=config)
    t2 = time.perf_counter()
peak = rss("VmHWM")
print(json.dumps({"in": size / MiB / (t1 - t0), "out": size / MiB / (t2 - t1),
                  "rss": peak - before, "rss_in": peak_in - before,
                  "requests": store.stats.snapshot()}))
"""


def _stream(
    backend: BenchBackend,
    size: int,
    mode: str,
    store_overrides: dict[str, object] | None = None,
    repo_overrides: dict[str, object] | None = None,
    tuned_malloc: bool = False,
    root: Path | None = None,
) -> dict[str, object]:
    args = pickle.dumps((backend, size, mode, store_overrides, repo_overrides or {})).hex()
    env = dict(os.environ)
    if tuned_malloc:
        # glibc raises its mmap threshold after freeing a large block, then keeps freed part
        # buffers in per-thread arenas: RSS measures the allocator, not the live data.
        env["MALLOC_MMAP_THRESHOLD_"] = str(MiB)
    out = subprocess.run(
        [sys.executable, "-c", _STREAM_SCRIPT, args],
        capture_output=True,
        text=True,
        cwd=root or Path(__file__).resolve().parents[1],
        env=env,
        timeout=1800,
    )
    if out.returncode:
        raise RuntimeError(f"stream benchmark ({mode}) failed:\n{out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(
    backend: BenchBackend,
    n_small: int,
    stream_size: int,
    n_reads: int,
    only: str | None,
    before: Path | None = None,
) -> None:
    if only != "stream":
        _small(backend, n_small, n_reads)
    if only != "small":
        _streams(backend, stream_size, before)


def _small(backend: BenchBackend, n_small: int, n_reads: int) -> None:
    store = backend.open()
    bodies = [os.urandom(KiB) for _ in range(n_small)]
    repo = ContentRepository(store.scoped("packed"), SETTINGS).initialize()
    repo.write_bytes(b"warm-up")  # capability probe and connection pool outside the timing
    repo.commit()
    store.put("naive/warm-up", b"x")

    base_s, base_req = _baseline_small(store, bodies)
    ours_s, ours_req, claims = _ours_small(repo, store, bodies, per_session=1000)
    step = max(1, n_small // 500)
    assert all(repo.read_bytes(claims[i]) == bodies[i] for i in range(0, n_small, step))
    base_puts, our_puts = _puts(base_req), _puts(ours_req)
    rcs = len({c.resource_claim for c in claims})
    t = table(
        f"MinIO: {n_small:,} contents of 1 KiB ({THREADS} writer threads)",
        "writer",
        "seconds",
        "contents/s",
        "PUTs",
        "requests",
    )
    t.add_row(
        "one object per content (baseline)",
        f"{base_s:.2f}",
        f"{n_small / base_s:,.0f}",
        f"{base_puts:,}",
        fmt_requests(_requests(base_req)),
    )
    t.add_row(
        f"content repository ({rcs} resource claims)",
        f"{ours_s:.2f}",
        f"{n_small / ours_s:,.0f}",
        f"{our_puts:,}",
        fmt_requests(_requests(ours_req)),
    )
    t.add_row(
        "ratio",
        "",
        f"{base_s / ours_s:.1f}x throughput",
        f"{base_puts / max(1, our_puts):.0f}x fewer",
        "",
    )
    console.print(t)

    ours_lat, single_lat = _read_latencies(repo, store, claims, n_reads)
    t3 = table(f"MinIO: {n_reads} random small-content reads", "read", "p50 ms", "ratio")
    t3.add_row("single GET of a 1 KiB object (baseline)", f"{median_ms(single_lat):.2f}", "1.00x")
    t3.add_row(
        "content claim (ranged GET + CRC check)",
        f"{median_ms(ours_lat):.2f}",
        f"{median_ms(ours_lat) / median_ms(single_lat):.2f}x",
    )
    console.print(t3)
    repo.close()


def _streams(backend: BenchBackend, stream_size: int, before: Path | None = None) -> None:
    t2 = table(
        f"MinIO: one content of {stream_size // MiB} MiB streamed in and out",
        "client",
        "in MiB/s",
        "out MiB/s",
        "peak RSS growth",
        "requests",
    )
    for tuned in (False, True):
        theirs = _stream(backend, stream_size, "boto3", tuned_malloc=tuned)
        ours = _stream(backend, stream_size, "ours", STREAM_STORE, STREAM_REPO, tuned_malloc=tuned)
        note = " (MALLOC_MMAP_THRESHOLD_=1MiB)" if tuned else ""
        if before is not None:  # the same client from another tree (e.g. the previous commit)
            old = _stream(
                backend, stream_size, "ours", STREAM_STORE, STREAM_REPO, tuned, root=before
            )
            t2.add_row(
                f"content repository, before{note}",
                f"{old['in']:.0f} ({_ratio(old['in'], theirs['in'])})",
                f"{old['out']:.0f} ({_ratio(old['out'], theirs['out'])})",
                f"{_mib(old['rss']):.1f} MiB (in: {_mib(old['rss_in']):.1f})",
                fmt_requests(_requests(old["requests"])),  # type: ignore[arg-type]
            )
        t2.add_row(
            f"boto3 transfer manager{note}",
            f"{theirs['in']:.0f}",
            f"{theirs['out']:.0f}",
            f"{_mib(theirs['rss']):.1f} MiB",
            "",
        )
        t2.add_row(
            f"content repository{note}",
            f"{ours['in']:.0f} ({_ratio(ours['in'], theirs['in'])})",
            f"{ours['out']:.0f} ({_ratio(ours['out'], theirs['out'])})",
            f"{_mib(ours['rss']):.1f} MiB (in: {_mib(ours['rss_in']):.1f})",
            fmt_requests(_requests(ours["requests"])),  # type: ignore[arg-type]
        )
    console.print(t2)


def _mib(v: object) -> float:
    return float(v) / MiB  # type: ignore[arg-type]


def _ratio(a: object, b: object) -> str:
    return f"{float(a) / float(b):.2f}x"  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.content")
    parser.add_argument("--quick", action="store_true", help="small run for a smoke test")
    parser.add_argument("--only", choices=["small", "stream"], help="run one part")
    parser.add_argument("--before", type=Path, help="also stream with the code in this tree")
    args = parser.parse_args(argv)
    n_small = 5_000 if args.quick else 100_000
    stream = (64 if args.quick else 1024) * MiB
    reads = 100 if args.quick else 1000
    with minio_backend() as backend:
        run(backend, n_small, stream, reads, args.only, args.before)


if __name__ == "__main__":
    main()
