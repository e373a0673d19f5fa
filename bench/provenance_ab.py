"""FlowFile lookup among N events on MinIO, older code against this tree in the same run.

    python -m bench.provenance_ab --before DIR [--events N] [--rounds R] [--warm W]

DIR is an export of older code (`git archive main | tar -x -C DIR`). Each code version
builds its own history (`bench.provenance.build_history`, its own file format) under its own
prefix of one MinIO server; then worker processes (PYTHONPATH = their tree) answer lookups in
turn, alternated one by one, so every version sees the same machine at the same moment:

* before: the older code on its own files;
* after, older files: this tree on the older code's files (the reading side alone);
* after: this tree on its own files (reading and writing sides).

Per round: one cold lookup (a new repository object: no footers, nothing cached) and W warm
lookups of other FlowFiles. Printed per round: cold and warm p50 latency, CPU per warm lookup
(the worker's process time, all threads) and requests per warm lookup by type.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from bench.common import BenchBackend, console, minio_backend, table

PER_FLOWFILE = 5


def _uuid(f: int) -> str:  # bench.provenance.flowfile_uuid, without importing this tree's code
    return f"5e1f0c2a-0000-4000-8000{(f * 2654435761) & (2**40 - 1):013d}"


# -- worker (runs with PYTHONPATH = one code tree) ---------------------------------------------
def _backend(spec: dict[str, str]) -> BenchBackend:
    from storage import StoreSettings

    settings = StoreSettings(
        endpoint_url=spec["endpoint"],
        access_key_id=spec["key"],
        secret_access_key=spec["secret"],
        region=spec["region"],
    )
    return BenchBackend("minio", spec["uri"], settings)


def worker(spec: dict[str, str], inp: IO[str], out: IO[str]) -> None:
    """One line per lookup: `cold UUID` (a new repository first) or `warm UUID`."""
    from provenance import ProvenanceRepository, ProvenanceSettings, Query, SearchTerm

    store = _backend(spec).open().scoped("lookup")
    repo = None
    caches = tempfile.TemporaryDirectory(prefix="flowledger-bench-ab-")
    for n, line in enumerate(inp):
        cmd, uuid = line.split()
        if cmd == "cold" or repo is None:
            if repo is not None:
                repo.close()
            cache = f"{caches.name}/{n}"  # a new reader: nothing cached, not even on disk
            repo = ProvenanceRepository.open(
                store, ProvenanceSettings(cache_dir=cache), recover=False
            )
        store.stats.reset()
        cpu, start = time.process_time(), time.perf_counter()
        found = repo.query(Query((SearchTerm("flowfile_uuid", uuid),), max_results=100))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        reply = {"n": len(found), "s": wall, "cpu": cpu, "reqs": store.stats.snapshot()}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    if repo is not None:
        repo.close()
    caches.cleanup()


def build(spec: dict[str, str], total: int) -> None:
    from bench.provenance import build_history

    with tempfile.TemporaryDirectory(prefix="flowledger-bench-ab-") as tmp:
        console.print(build_history(_backend(spec), total, Path(tmp)))


#: Runs this file's `worker` or `build` with another tree's packages: by path, from a neutral
#: folder (no `bench/` of this tree on sys.path: the older tree need not have this module).
_BOOT = "import json, runpy, sys; g = runpy.run_path(sys.argv[1]); g[sys.argv[2]](*sys.argv[3:])"


def _in_tree(tree: Path, fn: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, "-c", _BOOT, __file__, fn, *args]
    return subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir(), text=True, **kw)


def serve(spec: str) -> None:
    worker(json.loads(spec), sys.stdin, sys.stdout)


def build_json(spec: str, total: str) -> None:
    build(json.loads(spec), int(total))


# -- driver ------------------------------------------------------------------------------------
class _Worker:
    def __init__(self, tree: Path, spec: dict[str, str]) -> None:
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
        self.proc = _in_tree(tree, "serve", json.dumps(spec), **pipes)

    def ask(self, cmd: str, uuid: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{cmd} {uuid}\n")
        self.proc.stdin.flush()
        reply: dict[str, Any] = json.loads(self.proc.stdout.readline())
        assert reply["n"] == PER_FLOWFILE, reply
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def _summary(cold: dict[str, Any], warm: list[dict[str, Any]]) -> dict[str, Any]:
    reqs: dict[str, float] = {}
    for r in warm:
        for kind, n in r["reqs"].items():
            reqs[kind] = reqs.get(kind, 0.0) + n / len(warm)
    return {
        "cold_ms": cold["s"] * 1000,
        "cold_requests": sum(cold["reqs"].values()),
        "warm_p50_ms": statistics.median(r["s"] for r in warm) * 1000,
        "warm_cpu_ms": statistics.mean(r["cpu"] for r in warm) * 1000,
        "warm_requests": dict(sorted(reqs.items())),
        "load": os.getloadavg()[0],
    }


def run(before: Path, total: int, rounds: int, warm_n: int) -> list[dict[str, Any]]:
    here = Path(__file__).resolve().parents[1]
    rows: list[dict[str, Any]] = []
    with minio_backend() as b:
        s = b.settings
        base = {
            "endpoint": s.endpoint_url or "",
            "key": s.access_key_id or "",
            "secret": s.secret_access_key or "",
            "region": s.region,
        }
        specs = {name: {**base, "uri": f"{b.uri}-{name}"} for name in ("before", "after")}
        for name, tree in (("before", before), ("after", here)):
            console.print(f"building {total:,} events with the {name} code ({tree})")
            built = _in_tree(tree, "build_json", json.dumps(specs[name]), str(total))
            if built.wait() != 0:
                raise SystemExit(f"building with the {name} code failed")
        versions = {
            "before": _Worker(before, specs["before"]),
            "after, older files": _Worker(here, specs["before"]),
            "after": _Worker(here, specs["after"]),
        }
        flowfiles = total // PER_FLOWFILE
        try:
            for rnd in range(rounds):
                picks = [
                    _uuid((k * 7_919_993 + 12_345 + rnd * 104_729) % flowfiles)
                    for k in range(warm_n + 1)
                ]
                order = list(versions) if rnd % 2 == 0 else list(reversed(versions))
                cold = {name: versions[name].ask("cold", picks[0]) for name in order}
                warm: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
                for i, uuid in enumerate(picks[1:]):
                    for name in order if i % 2 == 0 else reversed(order):
                        warm[name].append(versions[name].ask("warm", uuid))
                for name in versions:
                    rows.append(
                        {"round": rnd + 1, "code": name, **_summary(cold[name], warm[name])}
                    )
        finally:
            for w in versions.values():
                w.close()
    return rows


def _print(rows: list[dict[str, Any]], total: int) -> None:
    t = table(
        f"FlowFile lookup among {total:,} events on MinIO, before vs after (same run)",
        "round",
        "code",
        "load",
        "cold",
        "warm p50",
        "warm CPU",
        "requests per warm lookup",
    )
    for r in rows:
        reqs = ", ".join(f"{k} {v:.2f}" for k, v in r["warm_requests"].items())
        t.add_row(
            str(r["round"]),
            r["code"],
            f"{r['load']:.1f}",
            f"{r['cold_ms']:,.0f} ms ({r['cold_requests']} req)",
            f"{r['warm_p50_ms']:.1f} ms",
            f"{r['warm_cpu_ms']:.1f} ms",
            reqs,
        )
    console.print(t)
    console.print("goals: warm ≤ 50 ms, cold ≤ 500 ms (10M events, default settings)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench.provenance_ab", description=__doc__)
    ap.add_argument("--before", type=Path, help="an export of the older code")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=20, help="warm lookups per round")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.before is None:
        ap.error("--before DIR is required")
    rows = run(args.before, args.events, args.rounds, args.warm)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    _print(rows, args.events)


if __name__ == "__main__":
    main()
