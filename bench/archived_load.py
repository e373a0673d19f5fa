"""Archived timeline load of 100,000 instants (10 files of 10,000), old vs new code in one run.

The archive is fabricated once (bench.archival's writers) on the local FS and on MinIO; then
worker processes, alternating between `--before DIR` (PYTHONPATH, e.g. `git archive main |
tar -x -C DIR`) and this tree, load it with a fresh `ArchivedTimeline` each time.

`python -m bench archived_load [--quick] [--before DIR]`
"""

from __future__ import annotations

import json
import os
import pickle
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from bench.archival import _fabricate_archived
from bench.common import (
    BenchBackend,
    before_tree,
    code_trees,
    console,
    local_backend,
    minio_backend,
    table,
)

OPS = ["instant times", "Timeline", "with metadata"]

_WORKER = r"""
import json, pickle, sys, time
from storage import open_store
from timeline.archive import ArchivedTimeline
backend, prefix, reps = pickle.loads(bytes.fromhex(sys.argv[1]))
store = open_store(backend.uri, backend.settings).scoped(prefix)
ops = {
    "instant times": lambda: ArchivedTimeline(store).instant_times(),
    "Timeline": lambda: ArchivedTimeline(store).timeline(),
    "with metadata": lambda: ArchivedTimeline(store).records(with_bodies=True),
}
ArchivedTimeline(store).timeline()  # warm: imports, connection pool, page cache
out = {}
for name, fn in ops.items():
    store.stats.reset()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        n = len(fn())
        samples.append(time.perf_counter() - t0)
    out[name] = {"s": samples, "n": n, "requests": store.stats.total() // reps}
print(json.dumps(out))
"""


def _worker(backend: BenchBackend, root: Path, prefix: str, reps: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, pickle.dumps((backend, prefix, reps)).hex()],
        capture_output=True, text=True, cwd=root, timeout=1800,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"worker failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(backend: BenchBackend, n: int, rounds: int, before: Path | None) -> None:
    prefix = f"archived-{n}-{uuid.uuid4().hex[:6]}"
    _fabricate_archived(backend.open().scoped(prefix), n, with_log=False)
    trees = code_trees(before)
    samples: dict[tuple[str, str], list[float]] = {}
    requests: dict[str, int] = {}
    for _ in range(rounds):  # alternate the trees: both see the same machine load
        for label, root in trees:
            assert root is not None
            for op, r in _worker(backend, root, prefix, 3).items():
                assert r["n"] == n, (op, r["n"])
                samples.setdefault((label, op), []).extend(r["s"])
                requests[op] = r["requests"]
    t = table(
        f"{backend.name}: load {n:,} archived instants (median / min ms of {rounds * 3})",
        "what",
        *(label for label, _ in trees),
        *(["after / before"] if before else []),
        "requests",
    )
    for op in OPS:
        cells = []
        for label, _ in trees:
            s = samples[(label, op)]
            cells.append(f"{statistics.median(s) * 1000:.0f} / {min(s) * 1000:.0f}")
        if before:
            ratio = statistics.median(samples[("after", op)]) / statistics.median(
                samples[("before", op)]
            )
            cells.append(f"{ratio:.2f}x")
        t.add_row(op, *cells, str(requests[op]))
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    before = before_tree(args)
    quick = "--quick" in args
    n, rounds = (10_000, 1) if quick else (100_000, 3)
    for make in (local_backend, minio_backend):
        with make() as backend:
            run(backend, n, rounds, before)


if __name__ == "__main__":
    main()
