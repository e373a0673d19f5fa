"""The HTTP clients of `bench service`: N keep-alive connections, each in its own thread, either
all in this process or spread over K client processes (`--client-procs K`).

Why both: 50 client threads in one Python process take turns on one GIL (5 ms switch
interval) on the same two cores as the server, so a response that arrived can wait for the
interpreter before its latency is taken; real clients are separate processes. The one-process
mode stays the benchmark's reference; the K-process mode shows how much of the tail is the
harness. Both send the same requests (thread n of N draws from `random.Random(n)`)."""

from __future__ import annotations

import http.client
import json
import multiprocessing
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

Call = Callable[[random.Random, Any], None]


@dataclass(frozen=True)
class Target:
    """What the clients call: a server and the request kind (`lookup` or `lineage`)."""

    host: str
    port: int
    token: str
    kind: str
    n_events: int
    flowfiles: int


def http_call(target: Target) -> Call:
    """One request of `target.kind` on a keep-alive connection (raises on a non-2xx)."""
    headers = {"Authorization": f"Bearer {target.token}", "Content-Type": "application/json"}

    def go(rng: random.Random, conn: http.client.HTTPConnection) -> None:
        if target.kind == "lookup":
            method, path = "GET", f"/nifi-api/provenance-events/{rng.randrange(target.n_events)}"
            data = None
        else:
            method, path = "POST", "/nifi-api/provenance/lineage"
            uuid = f"ff-{rng.randrange(target.flowfiles)}-a"
            data = json.dumps({"lineage": {"request": {"uuid": uuid}}}).encode()
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status}")

    return go


def connect(target: Target) -> Callable[[], http.client.HTTPConnection]:
    return lambda: http.client.HTTPConnection(target.host, target.port, timeout=120)


def run_threads(
    clients: int,
    per_client: int,
    call: Call,
    connect: Callable[[], Any],
    *,
    first: int = 0,
    started: Callable[[], None] | None = None,
) -> list[list[float]]:
    """Latencies (ms) of `per_client` calls by each of `clients` threads (numbered from
    `first`), per thread in call order. The threads start together (after `started`, if
    given); each connects on its first call, so that call's latency includes the connect."""
    latencies: list[list[float]] = []
    lock = threading.Lock()
    start = threading.Barrier(clients, action=started)

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
            latencies.append(mine)

    threads = [threading.Thread(target=worker, args=(first + n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def _serve(pipe: Connection) -> None:
    """A client process: run jobs `(target, clients, per_client, first)` until None."""
    while (job := pipe.recv()) is not None:
        target, clients, per_client, first = job

        def started() -> None:
            pipe.send("ready")
            pipe.recv()  # "go": every process is connected

        lat = run_threads(
            clients, per_client, http_call(target), connect(target), first=first, started=started
        )
        pipe.send(lat)


class ClientProcesses:
    """K client processes (spawned once); `run` spreads N clients over them."""

    def __init__(self, k: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding threads
        self._pipes: list[Connection] = []
        self._procs = []
        for _ in range(k):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child,), daemon=True)
            proc.start()
            self._pipes.append(parent)
            self._procs.append(proc)

    def run(self, target: Target, clients: int, per_client: int) -> list[list[float]]:
        k = min(len(self._pipes), clients)
        shares = [clients // k + (1 if i < clients % k else 0) for i in range(k)]
        first = 0
        for pipe, share in zip(self._pipes, shares, strict=False):
            pipe.send((target, share, per_client, first))
            first += share
        used = self._pipes[:k]
        for pipe in used:
            if pipe.recv() != "ready":
                raise RuntimeError("client process out of step")
        for pipe in used:
            pipe.send("go")
        out: list[list[float]] = []
        for pipe in used:
            out.extend(pipe.recv())
        return out

    def close(self) -> None:
        for pipe in self._pipes:
            pipe.send(None)
        for proc in self._procs:
            proc.join(10)
