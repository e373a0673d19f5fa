"""`provenance ingest` memory and speed: the streaming, staged ingest vs the baseline that
reads the whole file into events first (what `provenance ingest` did before), same file, same
run. Each mode runs in a fresh process; its peak RSS is the kernel's (wait4 ru_maxrss).

    python -m bench ingest [--quick]
    python -m bench.ingest [--quick] [--events N] [--baseline-events M]

2,000,000 events by default (200,000 with --quick). The baseline holds every event in memory,
so on a shared machine it can be run on the first M events only (`--baseline-events`); the
table then adds its linear extrapolation to N.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import console, table

MODES = ("baseline: whole file in memory", "streaming + staged commit")


def write_export(path: Path, n: int) -> int:
    """A NiFi site-to-site export as JSON lines (realistic field mix, ~600 bytes a line)."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            rec = {
                "eventId": f"5d0b2b5e-7c1a-4e0e-9b8c-{i:012d}",
                "eventOrdinal": i,
                "eventType": "SEND" if i % 2 else "RECEIVE",
                "timestampMillis": 1_700_000_000_000 + i,
                "timestamp": "2023-11-14T22:13:20.000Z",
                "durationMillis": 3,
                "lineageStart": 1_700_000_000_000,
                "componentId": f"proc-{i % 20}",
                "componentType": "PutS3Object" if i % 2 else "GetFile",
                "componentName": "the processor",
                "processGroupId": "pg-1",
                "processGroupName": "root",
                "entityId": f"ff-{i:012d}",
                "entityType": "org.apache.nifi.flowfile.FlowFile",
                "entitySize": i % 10_000,
                "updatedAttributes": {"filename": f"f{i}.csv", "path": "/in/"},
                "previousAttributes": {"filename": f"f{i}.csv"},
                "actorHostname": "nifi-1",
                "contentURI": f"http://nifi-1/nifi-api/provenance-events/{i}/content/output",
                "transitUri": f"s3://bucket/out/{i}",
                "platform": "nifi",
                "application": "NiFi Flow",
            }
            fh.write(json.dumps(rec) + "\n")
    return path.stat().st_size


def child(mode: str, path: str, repo_dir: str) -> None:
    """One ingest in this process (run by `main` in a fresh interpreter)."""
    from provenance import ProvenanceRepository, ProvenanceSettings
    from provenance.ingest import ingest_file, read_events
    from storage import StoreSettings, open_store

    store = open_store("file://" + repo_dir, StoreSettings())
    settings = ProvenanceSettings(cache_dir=repo_dir + "-cache")
    with ProvenanceRepository.open(store, settings) as repo:
        if mode == MODES[0]:
            # Before: `events = list(read_events(fh))`, then 50,000-event batches.
            with open(path, encoding="utf-8") as fh:
                events = list(read_events(fh))
            n = 0
            for i in range(0, len(events), 50_000):
                n += len(repo.register_events(events[i : i + 50_000], sync=True))
        else:
            n = ingest_file(repo, Path(path)).events
        print(json.dumps({"events": n, "max_id": repo.max_event_id()}))


def head(path: Path, n: int, out: Path) -> Path:
    with open(path, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    return out


def _opt(argv: list[str], name: str, default: int) -> int:
    return int(argv[argv.index(name) + 1]) if name in argv else default


def run(mode: str, path: Path, tmp: Path) -> dict[str, float]:
    repo_dir = tmp / f"repo-{MODES.index(mode)}"
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.ingest", "--child", mode, str(path), str(repo_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    out = proc.stdout.read() if proc.stdout else ""
    if status != 0:
        raise SystemExit(f"bench ingest: {mode} failed (status {status})")
    result = json.loads(out.strip().splitlines()[-1])
    objects = sum(len(files) for _, _, files in os.walk(repo_dir / "provenance"))
    return {
        "events": float(result["events"]),
        "seconds": seconds,
        "rss_mib": usage.ru_maxrss / 1024,  # Linux: KiB
        "objects": float(objects),
    }


def main(argv: list[str]) -> None:
    n = _opt(argv, "--events", 200_000 if "--quick" in argv else 2_000_000)
    m = min(n, _opt(argv, "--baseline-events", n))
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-ingest-") as d:
        tmp = Path(d)
        path = tmp / "export.jsonl"
        size = write_export(path, n)
        console.print(f"{n:,} NiFi events, {size / 2**20:,.0f} MiB of JSON lines")
        base_path = path if m == n else head(path, m, tmp / "baseline.jsonl")
        results = {MODES[0]: run(MODES[0], base_path, tmp), MODES[1]: run(MODES[1], path, tmp)}
    base = results[MODES[0]]
    t = table(
        "provenance ingest (local FS)",
        "mode",
        "events",
        "peak RSS MiB",
        "RSS vs baseline",
        "seconds",
        "events/s",
        "objects written",
    )
    for mode, r in results.items():
        t.add_row(
            mode,
            f"{r['events']:,.0f}",
            f"{r['rss_mib']:,.0f}",
            f"{r['rss_mib'] / base['rss_mib']:.2f}x",
            f"{r['seconds']:.1f}",
            f"{r['events'] / r['seconds']:,.0f}",
            f"{r['objects']:.0f}",
        )
    if m < n:
        t.add_row(f"baseline extrapolated to {n:,}", f"{n:,}", f"~{base['rss_mib'] * n / m:,.0f}")
    console.print(t)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
    else:
        main(sys.argv[1:])
