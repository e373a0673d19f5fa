"""The HTTP service vs the same calls in-process: p50/p99 of an event lookup and a lineage
request at 1, 10 and 50 concurrent clients (local FS repository, loopback HTTP, keep-alive).

`python -m bench service [--quick] [--workers N]`: also against `flowledger serve --workers N`
(default 2; one process runs CPU-bound lookups one at a time on the GIL). Goal: lookup p99
<= 50 ms at 50 clients."""

from __future__ import annotations

import http.client
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.table import Table

from bench.common import console
from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from tests.support.service import TOKEN, ServiceProcess

CONCURRENCY = (1, 10, 50)


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


def _run(
    clients: int,
    per_client: int,
    call: Callable[[random.Random, object], None],
    connect: Callable[[], object],
) -> list[float]:
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def worker(n: int) -> None:
        rng = random.Random(n)
        conn = connect()
        mine = []
        start.wait()
        for _ in range(per_client):
            t = time.perf_counter()
            call(rng, conn)
            mine.append((time.perf_counter() - t) * 1000)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main(args: list[str]) -> None:
    quick = "--quick" in args
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 2
    flowfiles = 2_000 if quick else 10_000
    per_client = 10 if quick else 40
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-service-") as tmp:
        repo = str(Path(tmp) / "repo")
        _seed(repo, flowfiles)
        n_events = flowfiles * 4
        server = ServiceProcess(repo)
        multi = ServiceProcess(repo, args=("--workers", str(workers)))
        prov = ProvenanceRepository.open(open_store(repo), recover=False)
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

        def conn_to(srv: ServiceProcess) -> Callable[[], object]:
            return lambda: http.client.HTTPConnection(srv.host, srv.port, timeout=120)

        def http_call(method: str, path: str, body: object = None) -> None:
            def go(rng: random.Random, conn: object) -> None:
                c = conn  # type: ignore[assignment]
                data = None if body is None else json.dumps(body(rng)).encode()  # type: ignore[operator]
                c.request(method, path(rng), body=data, headers=headers)  # type: ignore[attr-defined]
                resp = c.getresponse()  # type: ignore[attr-defined]
                resp.read()
                if resp.status >= 300:
                    raise RuntimeError(f"{method} {path(rng)}: {resp.status}")

            return go  # type: ignore[return-value]

        lookup_http = http_call(
            "GET", lambda r: f"/nifi-api/provenance-events/{r.randrange(n_events)}"
        )
        lineage_http = http_call(
            "POST",
            lambda r: "/nifi-api/provenance/lineage",
            lambda r: {"lineage": {"request": {"uuid": f"ff-{r.randrange(flowfiles)}-a"}}},
        )

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
        try:
            for name, remote, local in (
                ("event lookup", lookup_http, lookup_local),
                ("lineage", lineage_http, lineage_local),
            ):
                for clients in CONCURRENCY:
                    for srv in (server, multi):  # warm caches and connections
                        _run(clients, 2, remote, conn_to(srv))
                    h = _run(clients, per_client, remote, conn_to(server))
                    _run(clients, 2, local, lambda: None)  # warmed as the servers are
                    i = _run(clients, per_client, local, lambda: None)
                    w = _run(clients, per_client, remote, conn_to(multi))
                    table.add_row(
                        name,
                        str(clients),
                        str(len(h)),
                        f"{statistics.median(h):.1f}",
                        f"{_pct(h, 0.99):.1f}",
                        f"{statistics.median(i):.1f}",
                        f"{_pct(i, 0.99):.1f}",
                        f"{_pct(h, 0.99) / max(_pct(i, 0.99), 1e-3):.1f}x",
                        f"{statistics.median(w):.1f}",
                        f"{_pct(w, 0.99):.1f}",
                        f"{_pct(w, 0.99) / max(_pct(i, 0.99), 1e-3):.1f}x",
                    )
        finally:
            prov.close()
            server.stop()
            multi.stop()
        console.print(table)
        load = (
            Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
        )
        console.print(f"load average (1/5/15 min) during the run: {' '.join(load)}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
