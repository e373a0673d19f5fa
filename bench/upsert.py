"""Upserts and deletes side by side on one MinIO: flowledger against pyiceberg, delta-rs and Hudi.

    python -m bench upsert [--quick] [--rows N] [--batch N] [--delete N] [--partitions N]
                           [--load-batches N] [--systems a,b,...] [--json OUT]

One MinIO, one bucket per system, one counting proxy per system in front of it
(bench/s3_count_proxy.py); each system runs alone in its own process (bench/upsert_systems.py;
flowledger's Spark path in local mode over s3a, bench/upsert_spark.py; Hudi in its own Spark
3.5 virtualenv, bench/peers/hudi_upsert.py) over the same inputs
(bench/upsert_data.py): the base table loaded in commits of consecutive keys, a 100k upsert with
updates spread at random, one whose updates hit the newest 5 % of keys, a delete of 10k keys and
an append of the clustered batch's rows under fresh keys (the baseline the clustered upsert is
measured against). Per system and step: wall time, S3 requests, bytes uploaded / bytes changed
(write amplification), peak memory of the process (and of the Spark driver JVM), the CPU
seconds of the worker process (`cpu_s`, all its threads, `cpu_sys_s` of them in the kernel;
robust to a shared machine), the time the system reports for finding the matching rows (index
lookup) where it reports one, and ratios against flowledger from the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.common import table
from bench.side_by_side import (
    Command,
    SystemResult,
    add_workload_args,
    chosen_systems,
    hudi_command,
    run_side_by_side,
)
from bench.upsert_data import Inputs, Workload, generate

SYSTEMS = ["flowledger", "flowledger-spark", "iceberg", "delta", "hudi"]
LABELS = {
    "flowledger": "flowledger (Python)",
    "flowledger-spark": "flowledger (Spark)",
    "iceberg": "pyiceberg",
    "delta": "delta-rs",
    "hudi": "Hudi (Spark)",
}
BUCKETS = ["flowledger", "flowledger-spark", "iceberg", "delta", "hudi"]
MiB = 1024 * 1024
QUICK = Workload(rows=200_000, batch=20_000, delete=2_000)
# Wider than bench.common's console: ten columns per table.
console = Console(width=150)


def command(name: str, inputs_json: Path, out: Path, hudi_options: list[str]) -> Command:
    """System `name`'s worker command (bench/upsert_systems.py, upsert_spark.py, Hudi's)."""
    if name == "hudi":
        return hudi_command("bench.peers.hudi_upsert", inputs_json, out, hudi_options)
    if name == "flowledger-spark":
        return [sys.executable, "-m", "bench.upsert_spark", str(inputs_json), str(out),
                str(out.parent)]  # fmt: skip
    return [sys.executable, "-m", "bench.upsert_systems", name, str(inputs_json), str(out),
            str(out.parent)]  # fmt: skip


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    return f"{value / base:.2f}x"


HIDDEN = {"instant", "rows"}  # extras the step tables leave out


def _short(v: Any) -> str:
    return f"{v:,.0f}" if isinstance(v, float) else str(v)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / MiB:,.0f}"


def report(inputs: Inputs, results: list[SystemResult]) -> None:
    ran = [r for r in results if not r.unavailable]
    base = next((r for r in ran if r.system == "flowledger"), None)
    steps = [("load", None), *((s.name, s) for s in inputs.steps)]
    w = inputs.workload
    for name, step in steps:
        what = (
            f"{w.rows:,} rows in {w.load_batches} commits, {w.partitions} partitions"
            if step is None
            else f"{step.rows:,} rows, {step.bytes / MiB:.1f} MiB as Parquet (zstd)"
        )
        t = table(f"{name}: {what}", "system", "seconds", "vs flowledger", "requests",
                  "by kind", "MiB up", "write amp.", "peak RSS MiB", "JVM peak MiB",
                  "index ms")  # fmt: skip
        changed = step.bytes if step else sum(s.bytes for s in inputs.loads)
        for r in ran:
            s = r.steps.get(name)
            if s is None:
                continue
            if s.error:
                t.add_row(LABELS[r.system], "error", s.error[:60], *["-"] * 7)
                continue
            b = base.steps.get(name) if base else None
            t.add_row(
                LABELS[r.system],
                f"{s.seconds:.2f}",
                _ratio(s.seconds, b.seconds if b and not b.error else None),
                str(s.requests.total),
                s.requests.short(),
                f"{s.requests.bytes_up / MiB:.1f}",
                f"{s.requests.bytes_up / changed:.1f}" if changed else "-",
                _mib(s.peak_rss),
                _mib(s.jvm_peak_rss),
                "-" if s.index_ms is None else f"{s.index_ms:,.0f}",
            )
        console.print(t)
        for r in ran:
            s = r.steps.get(name)
            shown = {k: v for k, v in (s.extra if s else {}).items() if k not in HIDDEN}
            if shown:
                details = " ".join(f"{k}={_short(v)}" for k, v in shown.items())
                console.print(f"  [dim]{LABELS[r.system]}: {details}")

    t = table("summary", "system", "clustered upsert / append (goal <= 1.5x)",
              "rows after all steps", "expected", "notes")  # fmt: skip
    for r in results:
        if r.unavailable:
            t.add_row(LABELS[r.system], "-", "-", "-", r.unavailable)
            continue
        up, app = r.steps.get("upsert_clustered"), r.steps.get("append")
        ok = up and app and not up.error and not app.error
        count = r.steps.get("count")
        rows = count.extra.get("rows") if count and not count.error else None
        notes = ", ".join(f"{k} {v}" for k, v in (r.info or {}).items())
        failed = [s.name for s in r.steps.values() if s.error]
        if failed:
            notes += f"; FAILED: {', '.join(failed)} (see the worker log)"
        t.add_row(
            LABELS[r.system],
            _ratio(up.seconds, app.seconds) if ok and up and app else "-",
            "-" if rows is None else f"{rows:,}",
            f"{inputs.expected_rows:,}",
            notes + ("" if rows in (None, inputs.expected_rows) else "  ROW COUNT DIFFERS"),
        )
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench upsert", description=__doc__)
    d = Workload()
    ap.add_argument("--quick", action="store_true", help="smoke run: 200k rows, 20k, 2k")
    ap.add_argument("--delete", type=int, help="keys deleted (10k; quick 2k)")
    ap.add_argument(
        "--key-scope",
        choices=["global", "partition"],
        help="flowledger's key scope (default: the table default)",
    )
    add_workload_args(
        ap,
        SYSTEMS,
        "extra Hudi write option, e.g. hoodie.index.type=BLOOM (default: Hudi's defaults)",
    )
    args = ap.parse_args(argv)
    systems = chosen_systems(ap, args, SYSTEMS)
    base = QUICK if args.quick else d
    w = Workload(
        args.rows or base.rows,
        args.batch or base.batch,
        args.delete or base.delete,
        args.partitions,
        args.load_batches,
    )

    env = {"FLOWLEDGER_KEY_SCOPE": args.key_scope} if args.key_scope else {}
    inputs, results, _ = run_side_by_side(
        "flowledger-bench-upsert-",
        args.workdir,
        lambda d: generate(w, d),
        systems,
        LABELS,
        lambda name, inputs_json, out: command(name, inputs_json, out, args.hudi_option),
        console,
        buckets=BUCKETS,
        env=env,
    )
    report(inputs, results)
    if args.json:
        raw = {"workload": asdict(w), "expected_rows": inputs.expected_rows,
               "results": [asdict(r) for r in results]}  # fmt: skip
        args.json.write_text(json.dumps(raw, indent=1, default=str))


if __name__ == "__main__":
    main()
