"""The HTTP service vs the same calls in-process: p50/p99 of an event lookup and a lineage
request at 1, 10 and 50 concurrent clients (local FS repository, loopback HTTP, keep-alive).

`python -m bench service [--quick] [--workers N] [--client-procs K] [--before DIR]`: also against
`flowledger serve --workers N` (default 2; one process runs CPU-bound lookups one at a time on
the GIL). The clients run as threads of this process (the reference), then again spread over
K client processes (default 5; see bench/service_clients.py for why), with the server's CPU
time per request from /proc; `--before DIR` (older code, e.g. `git archive`) runs a third
server from DIR and measures it with the same clients right after this code's. Goal: lookup p99
<= 50 ms at 50 clients."""

from __future__ import annotations

import os
import random
import statistics
import tempfile
from pathlib import Path

from rich.table import Table

from bench.common import before_tree, console
from bench.service_clients import ClientProcesses, Target, connect, http_call, run_threads
from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from tests.support.service import TOKEN, ServiceProcess

CONCURRENCY = (1, 10, 50)
Lat = list[list[float]]  # latencies (ms) per client, in call order


def _seed(repo: str, flowfiles: int) -> None:
    """`flowfiles` chains: RECEIVE -> FORK into two children -> each child DROPped."""
    events = []
    t0 = 1_790_000_000_000
    for i in range(flowfiles):
        p, a, b = f"ff-{i}", f"ff-{i}-a", f"ff-{i}-b"
        events += [
            ProvenanceEvent(
                "RECEIVE",
                p,
                "in",
                "ListenHTTP",
                100,
                event_time=t0 + i,
                transit_uri="http://src",
                updated_attributes={"filename": f"{i}.csv"},
            ),
            ProvenanceEvent(
                "FORK",
                p,
                "split",
                "SplitRecord",
                100,
                event_time=t0 + i + 1,
                parent_uuids=(p,),
                child_uuids=(a, b),
            ),
            ProvenanceEvent("DROP", a, "out", "Drop", 50, event_time=t0 + i + 2),
            ProvenanceEvent("DROP", b, "out", "Drop", 50, event_time=t0 + i + 2),
        ]
    with ProvenanceRepository.open(open_store(repo)) as prov:
        for k in range(0, len(events), 50_000):
            prov.register_events(events[k : k + 50_000], sync=True)
        prov.rollover()


def _cpu_s(pid: int) -> float:
    """CPU time (user + system) of process `pid` so far, from /proc (0 where there is none)."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return 0.0
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_ms_per(pid: int, since_s: float, requests: int) -> float:
    """Process `pid`'s CPU ms per request since `_cpu_s(pid)` was `since_s`."""
    return (_cpu_s(pid) - since_s) * 1000 / max(requests, 1)


def _flat(per_client: list[list[float]], skip_first: bool = False) -> list[float]:
    return [x for lat in per_client for x in lat[1 if skip_first else 0 :]]


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _arg(args: list[str], name: str, default: int) -> int:
    return int(args[args.index(name) + 1]) if name in args else default


def _p(xs: list[float]) -> tuple[str, str]:
    return f"{statistics.median(xs):.1f}", f"{_pct(xs, 0.99):.1f}"


def main(args: list[str]) -> None:
    quick = "--quick" in args
    workers = _arg(args, "--workers", 2)
    client_procs = _arg(args, "--client-procs", 5)
    before = before_tree(args)
    flowfiles = 2_000 if quick else 10_000
    per_client = 10 if quick else 40
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-service-") as tmp:
        repo = str(Path(tmp) / "repo")
        _seed(repo, flowfiles)
        n_events = flowfiles * 4
        server = ServiceProcess(repo)
        multi = ServiceProcess(repo, args=("--workers", str(workers)))
        old_server = ServiceProcess(repo, code=before) if before else None
        procs = ClientProcesses(client_procs)
        prov = ProvenanceRepository.open(open_store(repo), recover=False)

        def target(srv: ServiceProcess, kind: str) -> Target:
            return Target(srv.host, srv.port, TOKEN, kind, n_events, flowfiles)

        def lookup_local(rng: random.Random, _: object) -> None:
            prov.get_event(rng.randrange(n_events))

        def lineage_local(rng: random.Random, _: object) -> None:
            prov.lineage(f"ff-{rng.randrange(flowfiles)}-a")

        table = Table(title=f"service vs in-process ({n_events:,} events, local FS, loopback)")
        for col in (
            "call",
            "clients",
            "requests",
            "HTTP p50 ms",
            "HTTP p99 ms",
            "in-process p50 ms",
            "in-process p99 ms",
            "p99 ratio",
            f"{workers} workers p50 ms",
            f"{workers} workers p99 ms",
            "p99 ratio (workers)",
        ):
            table.add_column(col, justify="right")
        by_procs = Table(
            title="the same calls by client process count (1: the run above); server CPU",
            caption=(
                "procs: client processes (threads spread over them); warm: each connection's "
                f"first request (its TCP connect) left out; wk: --workers {workers}; CPU: the "
                "one-process server's CPU time per request, from /proc"
            ),
        )
        for col in (
            "call",
            "clients",
            "procs",
            "requests",
            "p50 ms",
            "p99 ms",
            "p99 warm",
            "wk p50",
            "wk p99",
            "wk p99 warm",
            "CPU ms/req",
        ):
            by_procs.add_column(col, justify="right")

        def procs_row(name: str, clients: int, k: int, h: Lat, h_cpu: float, w: Lat) -> None:
            by_procs.add_row(
                name,
                str(clients),
                str(min(k, clients)),
                str(len(_flat(h))),
                *_p(_flat(h)),
                f"{_pct(_flat(h, True) or [0.0], 0.99):.1f}",
                *_p(_flat(w)),
                f"{_pct(_flat(w, True) or [0.0], 0.99):.1f}",
                f"{h_cpu:.2f}",
            )

        compare = Table(
            title=f"one server process, before ({before}) vs after, same clients" if before else "",
            caption="ms; warm and CPU (the server's ms per request) as above",
        )
        for col in ("call", "clients", "procs", "before p50 / p99", "after p50 / p99"):
            compare.add_column(col, justify="right")
        for col in ("before p99 warm", "after p99 warm", "before CPU", "after CPU"):
            compare.add_column(col, justify="right")

        def timed_run(
            srv: ServiceProcess, t: Target, clients: int, spread: bool
        ) -> tuple[Lat, float]:
            """Latencies of `clients` clients (threads here, or spread over the client
            processes) and `srv`'s CPU ms per request meanwhile."""
            cpu0 = _cpu_s(srv.proc.pid)
            if spread:
                lat = procs.run(t, clients, per_client)
            else:
                lat = run_threads(clients, per_client, http_call(t), connect(t))
            return lat, _cpu_ms_per(srv.proc.pid, cpu0, len(_flat(lat)))

        def compare_row(
            name: str, clients: int, k: int, b: tuple[Lat, float], a: tuple[Lat, float]
        ) -> None:
            compare.add_row(
                name,
                str(clients),
                str(min(k, clients)),
                *(" / ".join(_p(_flat(x[0]))) for x in (b, a)),
                *(f"{_pct(_flat(x[0], True) or [0.0], 0.99):.1f}" for x in (b, a)),
                *(f"{x[1]:.2f}" for x in (b, a)),
            )

        try:
            for name, kind, local in (
                ("event lookup", "lookup", lookup_local),
                ("lineage", "lineage", lineage_local),
            ):
                one, many = target(server, kind), target(multi, kind)
                old = target(old_server, kind) if old_server else None
                for clients in CONCURRENCY:
                    for t in (one, many, old):  # warm caches (each run opens new connections)
                        if t:
                            run_threads(clients, 2, http_call(t), connect(t))
                    hs, h_cpu = timed_run(server, one, clients, False)
                    run_threads(clients, 2, local, lambda: None)  # warmed as the servers are
                    i = _flat(run_threads(clients, per_client, local, lambda: None))
                    ws = run_threads(clients, per_client, http_call(many), connect(many))
                    h, w = _flat(hs), _flat(ws)
                    i99 = max(_pct(i, 0.99), 1e-3)
                    table.add_row(
                        name,
                        str(clients),
                        str(len(h)),
                        *_p(h),
                        *_p(i),
                        f"{_pct(h, 0.99) / i99:.1f}x",
                        *_p(w),
                        f"{_pct(w, 0.99) / i99:.1f}x",
                    )
                    procs_row(name, clients, 1, hs, h_cpu, ws)
                    hk, hk_cpu = timed_run(server, one, clients, True)
                    wk = procs.run(many, clients, per_client)
                    procs_row(name, clients, client_procs, hk, hk_cpu, wk)
                    if old_server and old:
                        b1 = timed_run(old_server, old, clients, False)
                        compare_row(name, clients, 1, b1, (hs, h_cpu))
                        bk = timed_run(old_server, old, clients, True)
                        compare_row(name, clients, client_procs, bk, (hk, hk_cpu))
        finally:
            procs.close()
            prov.close()
            for srv in (server, multi, old_server):
                if srv:
                    srv.stop()
        console.print(table)
        console.print(by_procs)
        if before:
            console.print(compare)
        load = (
            Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
        )
        console.print(f"load average (1/5/15 min) during the run: {' '.join(load)}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
