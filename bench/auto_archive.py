"""Requests per commit with automatic archival, on MinIO, against a baseline in the same run.

Each commit opens the table afresh (`Table.open(store)`, as every CLI command does), writes one
row and reads `store.stats` (PROBE = a cached capability look-up, not a request). Configs:
automatic archival off; on (keep 20/30): commits that archive nothing vs the ones that archive.
`--before DIR` also runs the same worker with PYTHONPATH=DIR (e.g. an export of the previous
commit: `git archive main | tar -x -C DIR`), so old and new code meet the same server.

`python -m bench auto_archive [--quick] [--before DIR]`
"""

from __future__ import annotations

import json
import os
import pickle
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import BenchBackend, before_tree, code_trees, console, minio_backend, table

_WORKER = r"""
import json, pickle, sys, time
import pyarrow as pa
from storage import open_store
from timeline import Table, TableSettings
from timeline.archive import ArchivalSettings
backend, prefix, n, on = pickle.loads(bytes.fromhex(sys.argv[1]))
store = open_store(backend.uri, backend.settings).scoped(prefix)
archival = ArchivalSettings(auto_archive=on)
try:
    settings, configure = TableSettings(archival=archival), None
except TypeError:  # a --before tree from before archival moved into TableSettings
    from timeline.archive import configure
    settings = TableSettings()
rows = []
for i in range(n):
    store.stats.reset()
    t0 = time.perf_counter()
    table = Table.open(store, settings)
    if configure is not None:
        configure(table, archival)
    table.write(pa.table({"a": [i]}))
    counts = {k: v for k, v in store.stats.snapshot().items() if k != "PROBE"}
    rows.append({"s": time.perf_counter() - t0, "requests": counts})
print(json.dumps(rows))
"""


Row = dict[str, Any]


def _run(backend: BenchBackend, root: Path, prefix: str, n: int, on: bool) -> list[Row]:
    args = pickle.dumps((backend, prefix, n, on)).hex()
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, args],
        capture_output=True, text=True, env=env, cwd=root, timeout=1800,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"worker failed:\n{out.stderr[-3000:]}")
    rows: list[Row] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows


def _total(r: Row) -> int:
    return sum(r["requests"].values())


def _archived(r: Row) -> bool:
    # an archival run PUTs its plan, file and checkpoint and CASes the manifest 3 times
    return int(r["requests"].get("PUT", 0)) > 8


def _summary(rows: list[Row]) -> tuple[str, str, str, str]:
    """(median requests of commits that archived nothing, of those that did, ms, mix)."""
    archiving = [r for r in rows if _archived(r)]
    plain = [r for r in rows if not _archived(r)]
    med = statistics.median(_total(r) for r in plain)
    arch = "-"
    if archiving:
        arch = f"{statistics.median(_total(r) for r in archiving):.0f} ({len(archiving)}x)"
    ms = statistics.median(float(r["s"]) for r in plain) * 1000
    mix = " ".join(f"{k}={v}" for k, v in sorted(plain[-1]["requests"].items()))
    return f"{med:.0f}", arch, f"{ms:.0f}", mix


def run(backend: BenchBackend, n: int, before: Path | None) -> None:
    t = table(
        f"MinIO: requests per commit, {n} commits, table reopened per commit (CLI-like)",
        "code / automatic archival",
        "requests, nothing archived (median)",
        "requests, archiving commits",
        "ms (median)",
        "mix of the last plain commit",
    )
    for label, root in code_trees(before):
        for on in (False, True):
            rows = _run(backend, root, f"{label}-{'on' if on else 'off'}", n, on)
            med, arch, ms, mix = _summary(rows)
            t.add_row(f"{label} / {'on (20/30)' if on else 'off'}", med, arch, ms, mix)
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    before = before_tree(args)
    n = 40 if "--quick" in args else 80
    with minio_backend() as backend:
        run(backend, n, before)


if __name__ == "__main__":
    main()
