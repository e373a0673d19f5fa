"""Where a durable per-event ingest spends its time, per 1,000-event batch.

    python -m bench.provenance_event_profile --events 200000 [--mode event|columnar]
        [--cprofile FILE] [--harness PATH]

Runs the NiFi peer harness's flowledger ingest loop (its `events_batch` / `columnar_batch`
builders, `register_events(..., sync=True)` per batch of 1,000 on a local store) with
perf_counter sections wrapped around the steps of the write path: building the batch,
conversion to Arrow, NiFi's rules (vectorized), id allocation (a CAS, overlapped with the
encoding on an I/O thread), encoding the journal block, the durable write (append + fdatasync,
overlapped with the journal filter) and what remains. Sections measured on the I/O thread are
reported separately: they overlap the calling thread's work.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import importlib.util
import json
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HARNESS = Path("/work/shared/peers/nifi/peer_bench.py")
BATCH = 1000


class Sections:
    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._main = threading.get_ident()

    def watch_gc(self) -> None:
        """Time the cyclic garbage collector per generation (it runs inside other sections:
        its time is counted there too)."""
        started: list[float] = []

        def on_gc(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                started.append(time.perf_counter())
            elif started:
                key = f"gc gen{info['generation']}"
                self.total[key] += time.perf_counter() - started.pop()
                self.calls[key] += 1

        gc.callbacks.append(on_gc)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                key = name if threading.get_ident() == self._main else f"{name} (I/O thread)"
                self.total[key] += time.perf_counter() - t0
                self.calls[key] += 1

        return timed


def _harness(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("peer_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _instrument(s: Sections) -> None:
    from provenance import ids, journal, records, schema
    from storage import AppendLog

    records.events_to_table = s.wrap("convert", records.events_to_table)
    records.check_events = s.wrap("validate", records.check_events)
    schema.conform = s.wrap("conform", schema.conform)
    journal.assign_ids = s.wrap("assign ids", journal.assign_ids)
    journal.encode_journal = s.wrap("encode", journal.encode_journal)
    ids.IdAllocator.allocate = s.wrap("id allocation", ids.IdAllocator.allocate)  # type: ignore[method-assign]
    journal.JournalWriter._allocate_and_encode = s.wrap(  # type: ignore[method-assign]
        "allocate+encode (wall)", journal.JournalWriter._allocate_and_encode
    )
    journal.JournalWriter._write = s.wrap("write+fdatasync", journal.JournalWriter._write)  # type: ignore[method-assign]
    journal.JournalWriter._put = s.wrap("put (wall)", journal.JournalWriter._put)  # type: ignore[method-assign]
    AppendLog.append = s.wrap("log append", AppendLog.append)  # type: ignore[method-assign]


def run(events: int, mode: str, harness: Path, prof: cProfile.Profile | None) -> dict[str, Any]:
    peer = _harness(harness)
    s = Sections()
    _instrument(s)
    s.watch_gc()
    from provenance import ProvenanceRepository, ProvenanceSettings, repository
    from storage import open_store

    repository.to_table = s.wrap("to_table (wall)", repository.to_table)
    with tempfile.TemporaryDirectory(prefix="fl-profile-") as tmp:
        repo = ProvenanceRepository(
            open_store(str(Path(tmp) / "repo")),
            ProvenanceSettings(cache_dir=str(Path(tmp) / "cache")),
        )
        j = repo.journals
        j._prepare = s.wrap("journal filter", j._prepare)
        j._on_flushed = s.wrap("on flushed", j._on_flushed)
        base = int(time.time() * 1000)
        build = s.wrap("build", peer.events_batch if mode == "event" else peer.columnar_batch)
        register = s.wrap(
            "register (wall)", repo.register_events if mode == "event" else repo.register_table
        )
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        for i in range(0, events, BATCH):
            register(build(i, min(BATCH, events - i), events, base), sync=True)
        wall = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        repo.close()
    batches = -(-events // BATCH)
    per_batch = {k: round(v / batches * 1000, 3) for k, v in sorted(s.total.items())}
    inside = s.total["build"] + s.total["register (wall)"]
    per_batch["other (loop)"] = round((wall - inside) / batches * 1000, 3)
    return {
        "mode": mode,
        "events": events,
        "wall_s": round(wall, 3),
        "events_per_s": round(events / wall),
        "ms_per_batch": per_batch,
        "gc_collections": {k: v for k, v in sorted(s.calls.items()) if k.startswith("gc")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--mode", choices=["event", "columnar"], default="event")
    ap.add_argument("--harness", type=Path, default=HARNESS)
    ap.add_argument("--cprofile", type=Path, help="write cProfile stats here")
    args = ap.parse_args()
    prof = cProfile.Profile() if args.cprofile else None
    out = run(args.events, args.mode, args.harness, prof)
    if prof is not None:
        prof.dump_stats(str(args.cprofile))
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
