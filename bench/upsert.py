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
(write amplification), peak memory of the process (and of the Spark driver JVM), the time the
system reports for finding the matching rows (index lookup) where it reports one, and ratios
against flowledger from the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.common import table
from bench.s3_count_proxy import CountingProxy, Counts
from bench.upsert_data import Inputs, Workload, generate

ROOT = Path(__file__).absolute().parents[1]
HUDI_ENV = Path(os.environ.get("HUDI_PEER_DIR", "/tmp/hudi-peer"))
HUDI_JARS = ("hudi-spark3.5-bundle_2.12-1.2.0.jar", "hadoop-aws-3.3.4.jar",
             "aws-java-sdk-bundle-1.12.262.jar")  # fmt: skip
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


@dataclass(frozen=True)
class StepResult:
    name: str
    seconds: float
    requests: Counts
    peak_rss: int | None
    jvm_peak_rss: int | None
    index_ms: float | None
    error: str | None
    extra: dict[str, Any]


@dataclass(frozen=True)
class SystemResult:
    system: str
    steps: dict[str, StepResult]
    unavailable: str | None = None
    info: dict[str, Any] | None = None


def hudi_missing(env: Path) -> str | None:
    """Why the Hudi environment cannot run, or None when it can."""
    need = [env / "venv" / "bin" / "python", *(env / "jars" / j for j in HUDI_JARS)]
    absent = [str(p) for p in need if not p.exists()]
    if not absent:
        return None
    return (
        f"Hudi environment absent ({', '.join(absent[:2])}{' ...' if len(absent) > 2 else ''}); "
        f"create it with `bash bench/peers/hudi_env.sh` (HUDI_PEER_DIR={env})"
    )


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
    out = work / f"{name}.json"
    log = work / f"{name}.log"
    env = dict(os.environ, **env_extra, AWS_ENDPOINT_URL=proxy.endpoint, PYTHONPATH=str(ROOT))
    if name == "hudi":
        cmd = [str(HUDI_ENV / "venv" / "bin" / "python"), "-m", "bench.peers.hudi_upsert",
               str(inputs_json), str(out), "--jars", str(HUDI_ENV / "jars"),
               *(f"--hoodie={kv}" for kv in hudi_options)]  # fmt: skip
    elif name == "flowledger-spark":
        cmd = [sys.executable, "-m", "bench.upsert_spark", str(inputs_json), str(out), str(work)]
    else:
        cmd = [sys.executable, "-m", "bench.upsert_systems", name, str(inputs_json), str(out),
               str(work)]  # fmt: skip
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
    if raw.get("unavailable"):
        return SystemResult(name, {}, raw["unavailable"])
    steps = {}
    for s in raw["steps"]:
        known = {"name", "start", "end", "seconds", "peak_rss", "jvm_peak_rss", "error", "index_ms"}
        steps[s["name"]] = StepResult(
            s["name"],
            s["seconds"],
            proxy.between(s["start"], s["end"]),
            s.get("peak_rss"),
            s.get("jvm_peak_rss"),
            s.get("index_ms"),
            s.get("error"),
            {k: v for k, v in s.items() if k not in known},
        )
    if rc != 0:
        console.print(f"[yellow]{LABELS[name]}: worker exit {rc}, see {log}")
    return SystemResult(name, steps, None, raw.get("info"))


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
    ap.add_argument("--rows", type=int, help="base table rows (10M; quick 200k)")
    ap.add_argument("--batch", type=int, help="keys per upsert batch (100k; quick 20k)")
    ap.add_argument("--delete", type=int, help="keys deleted (10k; quick 2k)")
    ap.add_argument("--partitions", type=int, default=d.partitions)
    ap.add_argument(
        "--load-batches",
        type=int,
        default=d.load_batches,
        help="commits that load the base table (each a range of consecutive keys)",
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
        help="extra Hudi write option, e.g. hoodie.index.type=BLOOM (default: Hudi's defaults)",
    )
    ap.add_argument(
        "--key-scope",
        choices=["global", "partition"],
        help="flowledger's key scope (default: the table default)",
    )
    ap.add_argument("--workdir", type=Path, help="keep inputs, logs and raw results here")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args(argv)  # fmt: skip
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        ap.error(f"unknown systems {sorted(unknown)}; known: {SYSTEMS}")
    base = QUICK if args.quick else d
    w = Workload(
        args.rows or base.rows,
        args.batch or base.batch,
        args.delete or base.delete,
        args.partitions,
        args.load_batches,
    )

    from infra import minio

    with tempfile.TemporaryDirectory(prefix="flowledger-bench-upsert-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        inputs = generate(w, work / "inputs")
        console.print(f"[dim]inputs generated in {time.perf_counter() - t0:.1f} s ({work})")
        server = minio.start(Path(tmp) / "minio", buckets=BUCKETS)
        env_extra = {k: v for k, v in server.env().items() if k != "AWS_ENDPOINT_URL"}
        if args.key_scope:
            env_extra["FLOWLEDGER_KEY_SCOPE"] = args.key_scope
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
    console.print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")
    report(inputs, results)
    if args.json:
        raw = {"workload": asdict(w), "expected_rows": inputs.expected_rows,
               "results": [asdict(r) for r in results]}  # fmt: skip
        args.json.write_text(json.dumps(raw, indent=1, default=str))


if __name__ == "__main__":
    main()
