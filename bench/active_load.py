"""Active timeline load vs total history on MinIO: `Table.open` (what every CLI command and
reader does) and `load_active`, 30 active commits over 100 / 1,000 / 10,000 archived ones.

History is fabricated once (bench.archival's writers). `--before DIR` loads the same tables
with the code in DIR (PYTHONPATH; e.g. `git archive main | tar -x -C DIR`), so old and new code
meet the same server in the same run. A second table times each request of a load alone, to
name the one that grows.

`python -m bench active_load [--quick] [--before DIR]`
"""

from __future__ import annotations

import json
import os
import pickle
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.archival import ACTIVE, _fabricate_active, _fabricate_archived
from bench.common import (
    BenchBackend,
    before_tree,
    code_trees,
    console,
    fmt_requests,
    minio_backend,
    table,
)
from storage import ObjectStore
from timeline.archive.layout import MANIFEST
from timeline.layout import INSTANTS, log_key

_WORKER = r"""
import json, pickle, statistics, sys, time
from storage import open_store
from timeline import Table
from timeline.archive.view import load_active
from timeline.store import TimelineStore
backend, prefixes, reps = pickle.loads(bytes.fromhex(sys.argv[1]))
stores = [open_store(backend.uri, backend.settings).scoped(p) for p in prefixes]
loaders = {"open": lambda s: Table.open(s), "load_active": lambda s: load_active(TimelineStore(s))}
samples = {(n, k): [] for n in loaders for k in range(len(stores))}
counts = {}
for s in stores:  # warm: connection pool, capability look-up
    for fn in loaders.values():
        fn(s)
for _ in range(reps):  # round-robin over histories: all see the same machine load
    for name, fn in loaders.items():
        for k, s in enumerate(stores):
            s.stats.reset()
            t0 = time.perf_counter()
            fn(s)
            samples[(name, k)].append(time.perf_counter() - t0)
            counts[(name, k)] = {o: v for o, v in s.stats.snapshot().items() if o != "PROBE"}
out = [
    {n: {"ms": statistics.median(samples[(n, k)]) * 1000, "requests": counts[(n, k)]}
     for n in loaders}
    for k in range(len(stores))
]
print(json.dumps(out))
"""


def _worker(backend: BenchBackend, root: Path, prefixes: list[str], reps: int) -> list[Any]:
    args = pickle.dumps((backend, prefixes, reps)).hex()
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, args],
        capture_output=True, text=True, cwd=root, timeout=1800,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"worker failed:\n{out.stderr[-3000:]}")
    rows: list[Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def _each_request(stores: list[ObjectStore], sizes: list[int], reps: int) -> list[dict[str, float]]:
    """Median ms of each request a load makes, alone, round-robin over the histories."""

    def ops(store: ObjectStore, history: int) -> dict[str, Callable[[], object]]:
        return {
            "LIST instants": lambda: store.list_page(INSTANTS),
            "GET manifest": lambda: store.get(MANIFEST),
            "GET log probe": lambda: store.exists(log_key(history + ACTIVE + 1)),
        }

    table = [ops(s, h) for s, h in zip(stores, sizes, strict=True)]
    samples: list[dict[str, list[float]]] = [{name: [] for name in t} for t in table]
    for _ in range(reps + 1):
        for name in table[0]:
            for k, t in enumerate(table):
                t0 = time.perf_counter()
                t[name]()
                samples[k][name].append(time.perf_counter() - t0)
    return [{n: statistics.median(v[1:]) * 1000 for n, v in s.items()} for s in samples]


def run(backend: BenchBackend, sizes: list[int], reps: int, before: Path | None) -> None:
    prefixes = []
    for h in sizes:
        prefix = f"active-{h}-{uuid.uuid4().hex[:6]}"
        store = backend.open().scoped(prefix)
        _fabricate_archived(store, h)
        _fabricate_active(store, range(h + 1, h + ACTIVE + 1))
        prefixes.append(prefix)
    trees = code_trees(before)
    t = table(
        f"MinIO: load of {ACTIVE} active commits vs archived history (median of {reps})",
        "code / loader",
        *(f"{h:,} ms" for h in sizes),
        f"{sizes[-1]:,} vs {sizes[0]:,}",
        "requests per load",
    )
    for label, root in trees:
        rows = _worker(backend, root, prefixes, reps)
        for name in ("open", "load_active"):
            ms = [r[name]["ms"] for r in rows]
            loader = "Table.open" if name == "open" else "load_active"
            t.add_row(
                f"{label} / {loader}",
                *(f"{m:.1f}" for m in ms),
                f"{ms[-1] / ms[0]:.2f}x",
                " | ".join(fmt_requests(r[name]["requests"]) for r in rows),
            )
    console.print(t)
    each = _each_request([backend.open().scoped(p) for p in prefixes], sizes, reps)
    t2 = table(
        "MinIO: each request of a load, alone (median ms)",
        "request",
        *(f"{h:,}" for h in sizes),
        f"{sizes[-1]:,} vs {sizes[0]:,}",
    )
    for name in each[0]:
        vals = [e[name] for e in each]
        t2.add_row(name, *(f"{v:.2f}" for v in vals), f"{vals[-1] / vals[0]:.2f}x")
    console.print(t2)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    before = before_tree(args)
    quick = "--quick" in args
    with minio_backend() as backend:
        run(backend, [100, 1_000] if quick else [100, 1_000, 10_000], 5 if quick else 21, before)


if __name__ == "__main__":
    main()
