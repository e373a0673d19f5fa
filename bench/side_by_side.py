"""Running table systems side by side on one MinIO: what bench/upsert.py and
bench/merge_on_read.py share.

Each system runs alone in its own worker process, behind its own counting proxy
(bench/s3_count_proxy.py), over inputs generated once; the worker writes its steps (start,
end, seconds, peak memory, whatever else it measured) as JSON and the proxy's counts between
a step's start and end become that step's requests. Hudi runs in the Spark 3.5 virtualenv
`bench/peers/hudi_env.sh` creates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.s3_count_proxy import CountingProxy, Counts
from bench.upsert_data import Workload

ROOT = Path(__file__).absolute().parents[1]
HUDI_ENV = Path(os.environ.get("HUDI_PEER_DIR", "/tmp/hudi-peer"))
HUDI_JARS = ("hudi-spark3.5-bundle_2.12-1.2.0.jar", "hadoop-aws-3.3.4.jar",
             "aws-java-sdk-bundle-1.12.262.jar")  # fmt: skip
#: A worker's command line, or why the system cannot run here.
Command = list[str] | str
#: What a worker's step record holds besides the step's own figures (`StepResult.extra`).
KNOWN = {"name", "start", "end", "seconds", "peak_rss", "jvm_peak_rss", "error", "index_ms"}


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


def hudi_missing(env: Path = HUDI_ENV) -> str | None:
    """Why the Hudi environment cannot run, or None when it can."""
    need = [env / "venv" / "bin" / "python", *(env / "jars" / j for j in HUDI_JARS)]
    absent = [str(p) for p in need if not p.exists()]
    if not absent:
        return None
    return (
        f"Hudi environment absent ({', '.join(absent[:2])}{' ...' if len(absent) > 2 else ''}); "
        f"create it with `bash bench/peers/hudi_env.sh` (HUDI_PEER_DIR={env})"
    )


def hudi_command(module: str, inputs_json: Path, out: Path, options: Sequence[str]) -> Command:
    """The command running Hudi worker `module` in the Hudi environment, or why it cannot."""
    why = hudi_missing()
    if why:
        return why
    return [str(HUDI_ENV / "venv" / "bin" / "python"), "-m", module, str(inputs_json), str(out),
            "--jars", str(HUDI_ENV / "jars"), *(f"--hoodie={kv}" for kv in options)]  # fmt: skip


def run_systems(
    systems: Sequence[str],
    labels: dict[str, str],
    command: Callable[[str, Path, Path], Command],
    work: Path,
    endpoint: str,
    env_extra: dict[str, str],
    console: Console,
) -> list[SystemResult]:
    """Each system's worker in turn, alone: `command(name, inputs_json, out)` gives its
    command line, or the reason it cannot run (reported as the system being unavailable)."""
    results = []
    for name in systems:
        out = work / f"{name}.json"
        cmd = command(name, work / "inputs" / "inputs.json", out)
        if isinstance(cmd, str):
            results.append(SystemResult(name, {}, cmd))
        else:
            results.append(run_worker(name, labels[name], cmd, out, endpoint, env_extra, console))
    return results


def run_worker(
    name: str,
    label: str,
    cmd: list[str],
    out: Path,
    endpoint: str,
    env_extra: dict[str, str],
    console: Console,
) -> SystemResult:
    """Run one system's worker behind a fresh counting proxy; its steps with their requests."""
    proxy = CountingProxy(endpoint)
    log = out.with_suffix(".log")
    env = dict(os.environ, **env_extra, AWS_ENDPOINT_URL=proxy.endpoint, PYTHONPATH=str(ROOT))
    console.print(f"[dim]{time.strftime('%H:%M:%S')} {label}: {' '.join(cmd[1:3])} ...")
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
        console.print(f"[yellow]{label}: worker exit {rc}, see {log}")
    return SystemResult(name, steps, None, raw.get("info"))


def add_workload_args(ap: argparse.ArgumentParser, systems: Sequence[str], hudi_help: str) -> None:
    """The options both benchmarks take: workload size, systems, Hudi options, outputs."""
    d = Workload()
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
        "--systems",
        default=",".join(systems),
        help=f"comma-separated, run in this order (default {','.join(systems)})",
    )
    ap.add_argument("--hudi-option", action="append", default=[], metavar="K=V", help=hudi_help)
    ap.add_argument("--workdir", type=Path, help="keep inputs, logs and raw results here")
    ap.add_argument("--json", type=Path, help="write every figure here")


def chosen_systems(ap: argparse.ArgumentParser, args: argparse.Namespace,
                   known: Sequence[str]) -> list[str]:  # fmt: skip
    """`--systems` as a list, refusing names the benchmark does not know."""
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(known)
    if unknown:
        ap.error(f"unknown systems {sorted(unknown)}; known: {list(known)}")
    return systems


def run_side_by_side(
    prefix: str,
    workdir: Path | None,
    generate: Callable[[Path], Any],
    systems: Sequence[str],
    labels: dict[str, str],
    command: Callable[[str, Path, Path], Command],
    console: Console,
    buckets: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[Any, list[SystemResult], float]:
    """Generate the inputs, start one MinIO with a bucket per system (or `buckets`), run the
    systems (`run_systems`, `env` added to each worker's environment); the inputs, the results
    and the load average at the end."""
    from infra import minio

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        inputs = generate(work / "inputs")
        console.print(f"[dim]inputs generated in {time.perf_counter() - t0:.1f} s ({work})")
        server = minio.start(Path(tmp) / "minio", buckets=list(buckets or systems))
        env_extra = {k: v for k, v in server.env().items() if k != "AWS_ENDPOINT_URL"}
        env_extra.update(env or {})
        try:
            results = run_systems(
                systems, labels, command, work, server.endpoint, env_extra, console
            )
        finally:
            minio.stop(server)
    load = os.getloadavg()[0]
    console.print(f"load average {load:.1f} on {os.cpu_count()} CPUs at the end")
    return inputs, results, load
