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
import sys
from dataclasses import asdict
from pathlib import Path

from bench.mor_data import READS_AT, generate
from bench.mor_report import LABELS, console, report
from bench.mor_systems import BLOOM_FPP_ENV
from bench.side_by_side import (
    Command,
    add_workload_args,
    chosen_systems,
    hudi_command,
    run_side_by_side,
)
from bench.upsert_data import Workload

SYSTEMS = ["flowledger-cow", "flowledger-mor", "hudi"]
QUICK = Workload(rows=200_000, batch=20_000)


def command(name: str, inputs_json: Path, out: Path, hudi_options: list[str]) -> Command:
    """System `name`'s worker command (bench/mor_systems.py, Hudi's)."""
    if name == "hudi":
        return hudi_command("bench.peers.hudi_mor", inputs_json, out, hudi_options)
    return [sys.executable, "-m", "bench.mor_systems", name, str(inputs_json), str(out)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench merge_on_read",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = Workload()
    ap.add_argument("--quick", action="store_true", help="smoke run: 200k rows, upserts of 20k")
    ap.add_argument(
        "--reads-at",
        default=",".join(map(str, READS_AT)),
        help="delta commits after which to read (default 1,5,20)",
    )
    add_workload_args(
        ap, SYSTEMS, "extra Hudi write option (default: Hudi's defaults, see hudi_mor.py)"
    )
    ap.add_argument(
        "--bloom-fpp",
        type=float,
        help="flowledger's bloom_index_fpp (default: the table default); global keys over "
        "overlapping key ranges leave keys with several candidates at a loose rate",
    )
    args = ap.parse_args(argv)
    systems = chosen_systems(ap, args, SYSTEMS)
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

    inputs, results, load = run_side_by_side(
        "flowledger-bench-mor-",
        args.workdir,
        lambda d: generate(w, d, reads_at),
        systems,
        LABELS,
        lambda name, inputs_json, out: command(name, inputs_json, out, args.hudi_option),
        console,
        env={BLOOM_FPP_ENV: str(args.bloom_fpp)} if args.bloom_fpp is not None else None,
    )
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
