"""Durable ingest with the caller's next batch overlapping the write, against the
synchronous durable call, in one run.

    python -m bench.provenance_pipelined --events 200000 [--pairs 3] [--harness PATH]

Both sides run the NiFi peer harness's loop (its `events_batch` / `columnar_batch` builders,
1,000-event batches, a local store with fsync) in a fresh process each, alternately:
**sync** calls `register_events(batch, sync=True)` per batch as the harness does (the
baseline); **pipelined** registers each batch through `repo.pipelined()`, whose call returns a
future at once and resolves it when the batch is durable, and waits for the last one. Both
count the same acknowledged events; the table shows wall time including building the events,
the rate, and pipelined/sync per pair (median, min-max), plus the store writes (PUT, log
APPEND) per batch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import table
from bench.provenance_event_profile import HARNESS, _harness

BATCH = 1000


def _one(mode: str, how: str, events: int, harness: Path) -> dict[str, Any]:
    from provenance import ProvenanceRepository, ProvenanceSettings
    from storage import open_store

    peer = _harness(harness)
    build = peer.events_batch if mode == "event" else peer.columnar_batch
    base = int(time.time() * 1000)
    with tempfile.TemporaryDirectory(prefix="fl-pipelined-") as tmp:
        store = open_store(str(Path(tmp) / "repo"))
        repo = ProvenanceRepository(store, ProvenanceSettings(cache_dir=str(Path(tmp) / "c")))
        t0 = time.perf_counter()
        if how == "sync":
            register = repo.register_events if mode == "event" else repo.register_table
            for i in range(0, events, BATCH):
                register(build(i, min(BATCH, events - i), events, base), sync=True)
        else:
            with repo.pipelined() as pipe:
                send = pipe.register_events if mode == "event" else pipe.register_table
                for i in range(0, events, BATCH):
                    send(build(i, min(BATCH, events - i), events, base))
        wall = time.perf_counter() - t0
        requests = store.stats.snapshot()
        repo.close()
    return {"wall_s": wall, "requests": requests}


def _child(mode: str, how: str, events: int, harness: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.provenance_pipelined", "--child", mode, how,
         "--events", str(events), "--harness", str(harness)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--harness", type=Path, default=HARNESS)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "HOW"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_one(*args.child, args.events, args.harness)))
        return
    batches = -(-args.events // BATCH)
    t = table(
        f"Durable ingest, {args.events:,} events in {BATCH:,}-event batches, local store, fsync",
        "path", "sync ev/s (median)", "pipelined ev/s (median)",
        "pipelined/sync rate (median, min-max)", "PUT+APPEND per batch sync / pipelined",
    )  # fmt: skip
    for mode in ("event", "columnar"):
        runs: dict[str, list[dict[str, Any]]] = {"sync": [], "pipelined": []}
        for _ in range(args.pairs):
            for how in ("sync", "pipelined"):
                runs[how].append(_child(mode, how, args.events, args.harness))
        rate = {h: [args.events / r["wall_s"] for r in rs] for h, rs in runs.items()}
        ratios = [p / s for p, s in zip(rate["pipelined"], rate["sync"], strict=True)]

        def writes(how: str, runs: dict[str, list[dict[str, Any]]] = runs) -> float:
            req = runs[how][-1]["requests"]
            return float(sum(v for k, v in req.items() if k in ("PUT", "APPEND"))) / batches

        t.add_row(
            mode,
            f"{statistics.median(rate['sync']):,.0f}",
            f"{statistics.median(rate['pipelined']):,.0f}",
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
            f"{writes('sync'):.2f} / {writes('pipelined'):.2f}",
        )
    from rich.console import Console

    Console().print(t)


if __name__ == "__main__":
    main()
