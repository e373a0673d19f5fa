"""Where a durable ingest spends its time, per 1,000-event batch, per-event and columnar.

    python -m bench.provenance_event_profile [--events N] [--mode event|columnar|both]
        [--before DIR] [--pairs R] [--top K] [--harness PATH]

Runs the NiFi peer harness's flowledger ingest loop (its `events_batch` / `columnar_batch`
builders, then `register_events` / `register_table` with `sync=True` per batch of 1,000 on a
local store) with perf_counter sections wrapped around the steps of the write path: building
the batch, validation and conversion to Arrow (`to_table`; columnar: `conform`), id
allocation (a compare-and-swap, on an I/O thread while the journal block is encoded), the
encoding (Arrow IPC, the configured codec), the durable write (log append + fdatasync, on an
I/O thread while the journal filter is computed) and what remains. Sections measured on the
I/O thread are reported separately: they overlap the calling thread's work. The process's
CPU time per batch (all threads) is reported too: it moves less with the machine's load.

`--before DIR` (an export of older code, `git archive main | tar -x -C DIR`) runs each
measurement in a fresh process of that tree and of this one in turn, R times, so both see
the same machine; the table gives the median per side and the after/before ratio, with the
1-minute load average around the runs. `--top K` also prints this tree's K functions with
the most own time per batch (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import importlib.util
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HARNESS = Path("/work/shared/peers/nifi/peer_bench.py")
HERE = Path(__file__).resolve()
BATCH = 1000

#: The rows of the report, in write-path order (other sections are printed after them).
ROWS = (
    "build",
    "to_table (wall)",
    "conform (wall)",
    "allocate+encode (wall)",
    "encode",
    "id allocation",
    "id allocation (I/O thread)",
    "put (wall)",
    "journal filter",
    "write+fdatasync (I/O thread)",
    "write+fdatasync",
    "register (wall)",
    "other (loop)",
    "batch (wall)",
    "batch (CPU, all threads)",
    "batch (wall), p10",
)


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
    """Wrap the write path's steps where the repository and the journal writer look them up
    (module globals and methods of the code tree on PYTHONPATH)."""
    from provenance import ids, journal, repository
    from storage import AppendLog

    for module, name, label in (
        (repository, "to_table", "to_table (wall)"),
        (repository, "conform", "conform (wall)"),
        (journal, "assign_ids", "assign ids"),
        (journal, "encode_journal", "encode"),
    ):
        setattr(module, name, s.wrap(label, getattr(module, name)))
    ids.IdAllocator.allocate = s.wrap("id allocation", ids.IdAllocator.allocate)  # type: ignore[method-assign]
    w = journal.JournalWriter
    w._allocate_and_encode = s.wrap("allocate+encode (wall)", w._allocate_and_encode)  # type: ignore[method-assign]
    w._write = s.wrap("write+fdatasync", w._write)  # type: ignore[method-assign]
    w._put = s.wrap("put (wall)", w._put)  # type: ignore[method-assign]
    AppendLog.append = s.wrap("log append", AppendLog.append)  # type: ignore[method-assign]


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(events: int, mode: str, harness: Path, prof: cProfile.Profile | None) -> dict[str, Any]:
    peer = _harness(harness)
    s = Sections()
    _instrument(s)
    s.watch_gc()
    from provenance import ProvenanceRepository, ProvenanceSettings
    from storage import open_store

    with tempfile.TemporaryDirectory(prefix="fl-profile-") as tmp:
        repo = ProvenanceRepository(
            open_store(str(Path(tmp) / "repo")),
            ProvenanceSettings(cache_dir=str(Path(tmp) / "cache")),
        )
        j = repo.journals
        assert j._prepare is not None
        j._prepare = s.wrap("journal filter", j._prepare)
        base = int(time.time() * 1000)
        build = s.wrap("build", peer.events_batch if mode == "event" else peer.columnar_batch)
        register = s.wrap(
            "register (wall)", repo.register_events if mode == "event" else repo.register_table
        )
        register(build(0, BATCH, events, base), sync=True)  # warm-up: allocator, log, imports
        s.total.clear()
        s.calls.clear()
        if prof is not None:
            prof.enable()
        each: list[float] = []
        cpu0, t0 = _cpu_s(), time.perf_counter()
        for i in range(BATCH, events, BATCH):
            b0 = time.perf_counter()
            register(build(i, min(BATCH, events - i), events, base), sync=True)
            each.append(time.perf_counter() - b0)
        wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
        if prof is not None:
            prof.disable()
        repo.close()
    batches = -(-(events - BATCH) // BATCH)
    per_batch = {k: v / batches * 1000 for k, v in sorted(s.total.items())}
    inside = s.total["build"] + s.total["register (wall)"]
    per_batch["other (loop)"] = (wall - inside) / batches * 1000
    per_batch["batch (wall)"] = wall / batches * 1000
    per_batch["batch (CPU, all threads)"] = cpu / batches * 1000
    # The fastest tenth of the batches: what a batch costs when the machine lets it run
    # (the mean above carries every stall other processes cause).
    per_batch["batch (wall), p10"] = sorted(each)[len(each) // 10] * 1000
    return {
        "mode": mode,
        "events": events,
        "wall_s": round(wall, 3),
        "events_per_s": round((events - BATCH) / wall),
        "ms_per_batch": {k: round(v, 3) for k, v in per_batch.items()},
        "gc_collections": {k: v for k, v in sorted(s.calls.items()) if k.startswith("gc")},
    }


def best_of(mode: str, harness: Path, reps: int = 30) -> dict[str, float]:
    """Each step of the write path alone on one batch, the fastest of `reps` runs in ms: the
    work itself, with no other thread of the process competing and the fewest of the other
    processes' stalls (the median of a loaded machine carries those)."""
    peer = _harness(harness)
    from provenance import ProvenanceRepository, ProvenanceSettings
    from provenance.parquet_io import encode_journal
    from provenance.records import to_table
    from provenance.schema import assign_ids, conform
    from storage import open_store

    events, base = 100 * BATCH, int(time.time() * 1000)
    build = peer.events_batch if mode == "event" else peer.columnar_batch
    batch = build(5 * BATCH, BATCH, events, base)
    out: dict[str, float] = {}

    def best(name: str, fn: Callable[[], Any]) -> Any:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            got = fn()
            times.append(time.perf_counter() - t0)
        out[f"best: {name}"] = min(times) * 1000
        return got

    with tempfile.TemporaryDirectory(prefix="fl-profile-") as tmp:
        repo = ProvenanceRepository(
            open_store(str(Path(tmp) / "repo")),
            ProvenanceSettings(cache_dir=str(Path(tmp) / "cache")),
            background=False,
        )
        limit = repo.settings.max_attribute_length
        best("build", lambda: build(5 * BATCH, BATCH, events, base))
        if mode == "event":
            table = best("to_table", lambda: to_table(batch, limit))
        else:
            table = best("conform", lambda: conform(batch, limit))
        codec = repo.settings.journal_compression
        with_ids = best("assign ids", lambda: assign_ids(table, 0))
        data = best(f"encode ({codec})", lambda: encode_journal(with_ids, codec))
        best("journal filter", lambda: repo.journal_terms.filter_of(with_ids))
        register = repo.register_events if mode == "event" else repo.register_table
        register(batch, sync=True)  # the allocator and the log exist from here on
        best("id allocation (CAS)", lambda: repo.ids.allocate(BATCH))
        log = repo.store.open_append_log("journals/profile-log")
        assert log is not None
        ends = iter(range(0, 10**9, BATCH))
        best("log append + fdatasync", lambda: log.append(data, (e := next(ends), e + BATCH)))
        log.close()
        best("register call (sync)", lambda: register(batch, sync=True))
        repo.close()
    return out


def top_functions(prof: cProfile.Profile, batches: int, k: int) -> list[tuple[str, float]]:
    """The `k` functions with the most own time, in ms per batch."""
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = []
    for (file, line, name), (_, _, tottime, _, _) in stats.items():
        where = f"{Path(file).name}:{line}({name})" if file != "~" else name
        rows.append((where, tottime / batches * 1000))
    return sorted(rows, key=lambda r: -r[1])[:k]


# -- A/B: fresh processes of two code trees in turn -----------------------------------------------
def _one(tree: Path, events: int, mode: str, harness: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-P", str(HERE), "--child", "--events", str(events), "--mode", mode]
    cmd += ["--harness", str(harness)]
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    res: dict[str, Any] = json.loads(out.stdout)
    return res


def ab(before: Path, events: int, modes: list[str], rounds: int, harness: Path) -> None:
    here = HERE.parents[1]
    got: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        for mode in modes:
            sides = [("before", before), ("after", here)]
            for side, tree in sides if r % 2 == 0 else sides[::-1]:
                got[(mode, side)].append(_one(tree, events, mode, harness)["ms_per_batch"])
                loads.append(os.getloadavg()[0])
    print(
        f"\n{events:,} events per run, {rounds} runs per side, interleaved; "
        f"1-minute load {min(loads):.1f}-{max(loads):.1f}\n"
    )
    for mode in modes:
        b, a = got[(mode, "before")], got[(mode, "after")]
        names = [n for n in ROWS if any(n in x for x in a + b)]
        names += sorted({n for x in a + b for n in x} - set(names))
        print(f"| {mode}: ms per 1,000-event batch (median) | before | after | after/before |")
        print("| --- | ---: | ---: | ---: |")
        for n in names:
            mb = statistics.median(x.get(n, 0.0) for x in b)
            ma = statistics.median(x.get(n, 0.0) for x in a)
            ratio = f"{ma / mb:.2f}x" if mb > 0.005 else ""
            print(f"| {n} | {mb:.2f} | {ma:.2f} | {ratio} |")
        for n in ("batch (wall)", "batch (CPU, all threads)", "batch (wall), p10"):
            pairs = sorted(y[n] / x[n] for x, y in zip(b, a, strict=True))
            print(
                f"| {n}, after/before per pair (min / median / max) | | | "
                f"{pairs[0]:.2f} / {statistics.median(pairs):.2f} / {pairs[-1]:.2f} |"
            )
        print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--mode", choices=["event", "columnar", "both"], default="both")
    ap.add_argument("--harness", type=Path, default=HARNESS)
    ap.add_argument("--before", type=Path, help="an export of older code to compare against")
    ap.add_argument("--pairs", type=int, default=3, help="runs per side with --before")
    ap.add_argument("--top", type=int, default=0, help="print the K costliest functions")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    modes = ["event", "columnar"] if args.mode == "both" else [args.mode]
    if args.before is not None:
        ab(args.before, args.events, modes, args.pairs, args.harness)
    if args.child:
        res = run(args.events, modes[0], args.harness, None)
        res["ms_per_batch"].update(best_of(modes[0], args.harness))
        json.dump(res, sys.stdout)
        return
    if args.before is not None and not args.top:
        return
    for mode in modes:
        prof = cProfile.Profile() if args.top else None
        out = run(args.events, mode, args.harness, prof)
        print(json.dumps(out, indent=1))
        if prof is not None:
            batches = -(-(args.events - BATCH) // BATCH)
            print(f"{mode}: own time per batch, ms (cProfile)")
            for where, ms in top_functions(prof, batches, args.top):
                print(f"  {ms:7.3f}  {where}")


if __name__ == "__main__":
    main()
