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
from pathlib import Path
from typing import Any

from bench.archival import ACTIVE, _fabricate_active, _fabricate_archived
from bench.common import BenchBackend, console, fmt_requests, minio_backend, table
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
out = []
for prefix in prefixes:
    store = open_store(backend.uri, backend.settings).scoped(prefix)
    row = {}
    for name, fn in (("open", lambda: Table.open(store)),
                     ("load_active", lambda: load_active(TimelineStore(store)))):
        fn()  # warm: connection pool, capability look-up
        store.stats.reset()
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        counts = {k: v // reps for k, v in store.stats.snapshot().items() if k != "PROBE"}
        row[name] = {"ms": statistics.median(samples) * 1000, "requests": counts}
    out.append(row)
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


def _each_request(store: ObjectStore, history: int, reps: int) -> dict[str, float]:
    """Median ms of each request a load makes, alone."""
    ops = {
        "LIST instants": lambda: store.list_page(INSTANTS),
        "GET manifest": lambda: store.get(MANIFEST),
        "GET log probe": lambda: store.exists(log_key(history + ACTIVE + 1)),
    }
    out = {}
    for name, fn in ops.items():
        fn()
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        out[name] = statistics.median(samples) * 1000
    return out


def run(backend: BenchBackend, sizes: list[int], reps: int, before: Path | None) -> None:
    prefixes = []
    for h in sizes:
        prefix = f"active-{h}-{uuid.uuid4().hex[:6]}"
        store = backend.open().scoped(prefix)
        _fabricate_archived(store, h)
        _fabricate_active(store, range(h + 1, h + ACTIVE + 1))
        prefixes.append(prefix)
    trees = ([("before", before)] if before else []) + [("after", Path.cwd())]
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
    pairs = zip(prefixes, sizes, strict=True)
    each = [_each_request(backend.open().scoped(p), h, reps) for p, h in pairs]
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
    before = Path(args[args.index("--before") + 1]) if "--before" in args else None
    quick = "--quick" in args
    with minio_backend() as backend:
        run(backend, [100, 1_000] if quick else [100, 1_000, 10_000], 5 if quick else 21, before)


if __name__ == "__main__":
    main()
