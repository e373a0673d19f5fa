"""Large-content download only, vs boto3's transfer manager, old and new code in one run.

One content (and one plain object for boto3) is uploaded once; then fresh worker processes
download it in turn — boto3 `download_fileobj` (8 MiB chunks, 10 threads, seekable sink: its
best case), the content repository of `--before DIR` (PYTHONPATH), and of this tree — for
several rounds, so that all three see the same machine load. Peak RSS growth = VmHWM - VmRSS
before, in the worker.

`python -m bench content_download [--quick] [--before DIR]`
"""

from __future__ import annotations

import io
import json
import os
import pickle
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import BenchBackend, before_tree, console, minio_backend, table
from bench.content import STREAM_REPO, STREAM_STORE
from storage import open_store
from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings

MiB = 1024 * 1024

_WORKER = r"""
import io, json, pickle, sys, time
from dataclasses import replace
MiB = 1024 * 1024
backend, mode, key, claim, repo_overrides = pickle.loads(bytes.fromhex(sys.argv[1]))

class Sink(io.RawIOBase):  # discards bytes; seekable so boto3 writes ranges in parallel
    pos = 0
    def writable(self): return True
    def seekable(self): return True
    def tell(self): return self.pos
    def seek(self, pos, whence=0):
        self.pos = pos if whence == 0 else self.pos + pos
        return self.pos
    def write(self, b):
        self.pos += len(b)
        return len(b)

def rss(field):
    return int(open("/proc/self/status").read().split(field + ":")[1].split()[0]) * 1024

from storage import open_store
store = open_store(backend.uri, backend.settings)
store.exists("warm-up")
if mode == "boto3":
    from boto3.s3.transfer import TransferConfig
    from storage.s3 import make_client
    client = make_client(backend.settings)
    client.head_bucket(Bucket=store.bucket)
    config = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB)
    before = rss("VmRSS")
    t0 = time.perf_counter()
    client.download_fileobj(store.bucket, store.prefix + key, Sink(), Config=config)
else:
    from storage.content import ContentRepository, ContentRepositorySettings
    repo = ContentRepository(store.scoped("stream"), ContentRepositorySettings(
        archive_cleanup_frequency=0, cleanup_on_start=False, **repo_overrides)).initialize()
    before = rss("VmRSS")
    t0 = time.perf_counter()
    assert repo.export_to(claim, Sink()) == claim.length
took = time.perf_counter() - t0
print(json.dumps({"s": took, "rss": rss("VmHWM") - before}))
"""


def _worker(
    backend: BenchBackend, root: Path, mode: str, key: str, claim: ContentClaim
) -> dict[str, Any]:
    args = pickle.dumps((backend, mode, key, claim, STREAM_REPO)).hex()
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, args],
        capture_output=True, text=True, cwd=root, timeout=1800,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"worker ({mode}) failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(backend: BenchBackend, size: int, rounds: int, before: Path | None) -> None:
    from dataclasses import replace

    store = open_store(backend.uri, replace(backend.settings, **STREAM_STORE))  # type: ignore[arg-type]
    repo = ContentRepository(
        store.scoped("stream"),
        ContentRepositorySettings(
            archive_cleanup_frequency=0,
            cleanup_on_start=False,
            **STREAM_REPO,  # type: ignore[arg-type]
        ),
    ).initialize()
    block = os.urandom(MiB)
    data = io.BytesIO(block * (size // MiB))
    claim = repo.import_from(data)
    repo.commit()
    store.put("stream/boto3", data.getvalue())  # the same bytes for boto3
    del data
    here = Path.cwd()
    clients = [("boto3 transfer manager", "boto3", here)]
    if before:
        clients.append(("content repository, before", "ours", before))
    clients.append(("content repository, after", "ours", here))
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in clients}
    for _ in range(rounds):  # alternate: every client sees the same machine load
        for label, mode, root in clients:
            results[label].append(_worker(backend, root, mode, "stream/boto3", claim))
    t = table(
        f"MinIO: download of one {size // MiB} MiB content ({rounds} rounds, alternating)",
        "client",
        "MiB/s median (min-max)",
        "ratio to boto3 (median of per-round ratios)",
        "peak RSS growth (max)",
    )
    boto = results["boto3 transfer manager"]
    for label, _, _ in clients:
        rates = [size / MiB / r["s"] for r in results[label]]
        ratios = [b["s"] / r["s"] for b, r in zip(boto, results[label], strict=True)]
        t.add_row(
            label,
            f"{statistics.median(rates):.0f} ({min(rates):.0f}-{max(rates):.0f})",
            f"{statistics.median(ratios):.2f}x",
            f"{max(r['rss'] for r in results[label]) / MiB:.1f} MiB",
        )
    console.print(t)
    console.print(
        f"requests (ours, one download): GET={-(-size // STREAM_REPO['read_part_size']):,}"
    )  # type: ignore[operator]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    before = before_tree(args)
    quick = "--quick" in args
    with minio_backend() as backend:
        run(backend, (64 if quick else 512) * MiB, 2 if quick else 5, before)


if __name__ == "__main__":
    main()
