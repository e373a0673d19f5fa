"""What a durable batch costs: `register_events` / `register_table` with
`sync=True` per 1,000 events on the local store, fsync on, against the same calls with fsync
off in the same run (the cost of durability itself), with fsyncs and PUTs per flush.

Run it on a baseline tree and on this one in the same session to compare them:

    PYTHONPATH=<tree> .venv/bin/python -m bench.provenance_durable --events 100000

"build" is constructing the `ProvenanceEvent` objects (the per-event API's caller side).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import storage.local
from bench.provenance_journals import batch
from provenance import ProvenanceRepository, ProvenanceSettings
from provenance.records import to_table
from storage import StoreSettings, open_store

BATCH = 1000


def run(mode: str, fsync: bool, total: int, tmp: str) -> dict[str, float]:
    store = open_store("file://" + tmp + f"/{mode}-{fsync}", StoreSettings(fsync=fsync))
    settings = ProvenanceSettings(cache_dir=tmp + "/cache")
    repo = ProvenanceRepository.open(store, settings, background=False)
    calls = [0]
    real = os.fsync

    def counting(fd: int) -> None:
        calls[0] += 1
        real(fd)

    build = 0.0
    per: list[float] = []
    storage.local.os.fsync = counting  # type: ignore[attr-defined]
    store.stats.reset()
    try:
        for start in range(0, total, BATCH):
            t0 = time.perf_counter()
            events = batch(start, BATCH, total)
            build += time.perf_counter() - t0
            arg: Any = events
            register: Callable[..., list[int]] = repo.register_events
            if mode == "columnar":
                arg = to_table(events, 65536).drop_columns(["event_id"])
                register = repo.register_table
            t0 = time.perf_counter()
            register(arg, sync=True)
            per.append(time.perf_counter() - t0)
    finally:
        storage.local.os.fsync = real  # type: ignore[attr-defined]
    puts = store.stats.snapshot().get("PUT", 0)
    repo.close()
    flushes = len(per)
    return {
        "build_rate": total / build,
        "register_rate": total / sum(per),
        "p50_ms": statistics.median(per) * 1e3,
        "fsyncs": calls[0] / flushes,
        "puts": puts / flushes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=100_000)
    args = ap.parse_args()
    print(
        "| API | fsync | build ev/s | register ev/s | vs fsync off | p50 per batch | "
        "fsyncs per batch | PUTs per batch |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp:
        for mode in ("event", "columnar"):
            off = run(mode, False, args.events, tmp)
            on = run(mode, True, args.events, tmp)
            for name, r in (("off", off), ("on", on)):
                print(
                    f"| {mode} | {name} | {r['build_rate']:,.0f} | {r['register_rate']:,.0f} | "
                    f"{r['register_rate'] / off['register_rate']:.2f}x | {r['p50_ms']:.2f} ms | "
                    f"{r['fsyncs']:.1f} | {r['puts']:.1f} |"
                )


if __name__ == "__main__":
    main()
