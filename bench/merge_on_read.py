"""Merge-on-read against copy-on-write, with Hudi 1.2 merge-on-read on Spark beside it:

    python -m bench merge_on_read [--quick] [--rows N] [--batch N] [--partitions N]
                                  [--load-batches N] [--systems a,b,...] [--hudi-option K=V]
                                  [--workdir DIR] [--json OUT]

bench/upsert.py's table and first upsert (bench/mor_data.py: 10M rows, 10 columns, 20
partitions, loaded in commits of consecutive keys; upserts of 100k keys, 80 % random updates
and 20 % new keys), then more upserts of that size, one per delta commit. One MinIO, one bucket
and one counting proxy per system (bench/s3_count_proxy.py), each system alone in its own
process: flowledger copy-on-write and merge-on-read (bench/mor_systems.py), Hudi 1.2
MERGE_ON_READ on Spark 3.5 in its own virtualenv (bench/peers/hudi_mor.py).

Per system: the load; the first upsert (wall, requests, bytes uploaded / bytes changed); after
1, 5 and 20 delta commits a snapshot and a read-optimized read (full scans of every column,
checked against the expected row count and `qty` sum); one compaction run explicitly (wall,
rows/s, bytes/s) and a snapshot read after it. Copy-on-write stops after its first upsert and
one read: the baseline. Ratios: merge-on-read / copy-on-write upsert, snapshot /
read-optimized per step, flowledger / Hudi per step (bench/mor_report.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from bench.mor_data import READS_AT, generate
from bench.mor_report import LABELS, console, report
from bench.mor_systems import BLOOM_FPP_ENV
from bench.s3_count_proxy import CountingProxy
from bench.upsert import HUDI_ENV, StepResult, SystemResult, hudi_missing
from bench.upsert_data import Workload

ROOT = Path(__file__).absolute().parents[1]
SYSTEMS = ["flowledger-cow", "flowledger-mor", "hudi"]
QUICK = Workload(rows=200_000, batch=20_000)
KNOWN = {"name", "start", "end", "seconds", "peak_rss", "jvm_peak_rss", "error", "index_ms"}


def run_system(
    name: str,
    inputs_json: Path,
    work: Path,
    endpoint: str,
    env_extra: dict[str, str],
    hudi_options: list[str],
) -> SystemResult:
    if name == "hudi":
        why = hudi_missing(HUDI_ENV)
        if why:
            return SystemResult(name, {}, why)
    proxy = CountingProxy(endpoint)
    out, log = work / f"{name}.json", work / f"{name}.log"
    env = dict(os.environ, **env_extra, AWS_ENDPOINT_URL=proxy.endpoint, PYTHONPATH=str(ROOT))
    if name == "hudi":
        cmd = [
            str(HUDI_ENV / "venv" / "bin" / "python"),
            "-m",
            "bench.peers.hudi_mor",
            str(inputs_json),
            str(out),
            "--jars",
            str(HUDI_ENV / "jars"),
            *(f"--hoodie={kv}" for kv in hudi_options),
        ]
    else:
        cmd = [sys.executable, "-m", "bench.mor_systems", name, str(inputs_json), str(out)]
    console.print(f"[dim]{time.strftime('%H:%M:%S')} {LABELS[name]}: {' '.join(cmd[1:3])} ...")
    try:
        with log.open("w") as fh:
            rc = subprocess.call(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    finally:
        proxy.stop()
    if not out.exists():
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        return SystemResult(name, {}, f"worker failed (exit {rc}); log {log}:\n{tail}")
    raw = json.loads(out.read_text())
    steps = {
        s["name"]: StepResult(
            s["name"],
            s["seconds"],
            proxy.between(s["start"], s["end"]),
            s.get("peak_rss"),
            s.get("jvm_peak_rss"),
            s.get("index_ms"),
            s.get("error"),
            {k: v for k, v in s.items() if k not in KNOWN},
        )
        for s in raw["steps"]
    }
    if rc != 0:
        console.print(f"[yellow]{LABELS[name]}: worker exit {rc}, see {log}")
    return SystemResult(name, steps, None, raw.get("info"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench merge_on_read",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = Workload()
    ap.add_argument("--quick", action="store_true", help="smoke run: 200k rows, upserts of 20k")
    ap.add_argument("--rows", type=int, help="base table rows (10M; quick 200k)")
    ap.add_argument("--batch", type=int, help="keys per upsert (100k; quick 20k)")
    ap.add_argument("--partitions", type=int, default=d.partitions)
    ap.add_argument(
        "--load-batches",
        type=int,
        default=d.load_batches,
        help="commits that load the base table (each a range of consecutive keys)",
    )
    ap.add_argument(
        "--reads-at",
        default=",".join(map(str, READS_AT)),
        help="delta commits after which to read (default 1,5,20)",
    )
    ap.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"comma-separated, run in this order (default {','.join(SYSTEMS)})",
    )
    ap.add_argument(
        "--hudi-option",
        action="append",
        default=[],
        metavar="K=V",
        help="extra Hudi write option (default: Hudi's defaults, see hudi_mor.py)",
    )
    ap.add_argument(
        "--bloom-fpp",
        type=float,
        help="flowledger's bloom_index_fpp (default: the table default); global keys over "
        "overlapping key ranges leave keys with several candidates at a loose rate",
    )
    ap.add_argument("--workdir", type=Path, help="keep inputs, logs and raw results here")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        ap.error(f"unknown systems {sorted(unknown)}; known: {SYSTEMS}")
    reads_at = tuple(sorted({int(n) for n in args.reads_at.split(",") if n.strip()}))
    if not reads_at or reads_at[0] < 1:
        ap.error("--reads-at takes delta-commit counts >= 1")
    base = QUICK if args.quick else d
    w = Workload(
        args.rows or base.rows,
        args.batch or base.batch,
        base.delete,
        args.partitions,
        args.load_batches,
    )

    from infra import minio

    with tempfile.TemporaryDirectory(prefix="flowledger-bench-mor-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        inputs = generate(w, work / "inputs", reads_at)
        console.print(f"[dim]inputs generated in {time.perf_counter() - t0:.1f} s ({work})")
        server = minio.start(Path(tmp) / "minio", buckets=systems)
        env_extra = {k: v for k, v in server.env().items() if k != "AWS_ENDPOINT_URL"}
        if args.bloom_fpp is not None:
            env_extra[BLOOM_FPP_ENV] = str(args.bloom_fpp)
        try:
            results = [
                run_system(
                    s,
                    work / "inputs" / "inputs.json",
                    work,
                    server.endpoint,
                    env_extra,
                    args.hudi_option,
                )
                for s in systems
            ]
        finally:
            minio.stop(server)
    load = os.getloadavg()[0]
    console.print(f"load average {load:.1f} on {os.cpu_count()} CPUs at the end")
    report(inputs, results)
    if args.json:
        raw = {
            "workload": asdict(w),
            "inputs": asdict(inputs),
            "load_average": load,
            "results": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(raw, indent=1, default=str))


if __name__ == "__main__":
    main()
