"""The store's reads through four S3 clients, interleaved in one run on one MinIO: `obstore` (Rust
object_store), pyarrow's `S3FileSystem`, `bench/s3_fast_reads.py` (the hand-signed urllib3 path
the store used before obstore), plain botocore (boto3's client). Each client sits under the
store as a read adapter (`bench/s3_read_adapters.py`), so the provenance reader and the content
reader above it — and the checksums they verify — are the same code for all four.

    python -m bench s3_read_clients [--quick] [--events N] [--rounds R] [--warm W] [--size-mib M]
                                    [--part all|lookup|download]

* FlowFile lookup among N events (10M; `--quick` 200k; the history `bench.provenance` builds):
  per round, each client answers one cold lookup in a new process (fresh client, empty caches;
  timed: opening the repository and the query) and W warm lookups of other FlowFiles in one
  long-lived process per client, the clients taking turns lookup by lookup (the order reversed
  every other lookup), so they share the machine's load.
* Download of one M MiB content (1024; `--quick` 64) with the content repository's reader
  (4 MiB ranged GETs, 10 in flight, CRC-32 verified), one new process per client per round, in
  turn: MiB/s and peak RSS growth (VmHWM - VmRSS before).
* Requests: afterwards, each client once more through `bench/s3_count_proxy.py` (a cold lookup,
  5 warm lookups, one download), counted by the proxy; timings never go through the proxy.

Ratios are s3_fast's time over the client's (above 1: faster than s3_fast), one per round (cold,
download) or per lookup (warm: p50 of the per-lookup ratios per round), min/median/max over rounds.
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
from typing import Any

from bench.common import BenchBackend, console, minio_backend, table
from bench.s3_read_adapters import CLIENTS

PER_FLOWFILE = 5
MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[1]


def _uuid(f: int) -> str:
    from bench.provenance import flowfile_uuid

    return flowfile_uuid(f)


# -- worker process: one client --------------------------------------------------------------
def serve() -> None:
    """Reads `spec` (argv[1], JSON), then answers one JSON line per stdin line:
    `cold UUID`, `warm UUID` or `download`."""
    spec = json.loads(sys.argv[1])
    from dataclasses import replace

    from bench.content import STREAM_REPO
    from bench.s3_read_adapters import AdapterStore
    from provenance import ProvenanceRepository, ProvenanceSettings, Query, SearchTerm
    from storage import StoreSettings
    from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings

    settings = StoreSettings(
        endpoint_url=spec["endpoint"],
        access_key_id=spec["key"],
        secret_access_key=spec["secret"],
        region=spec["region"],
    )
    base = AdapterStore(spec["bucket"], spec["prefix"], settings, spec["client"])
    caches = tempfile.TemporaryDirectory(prefix="flowledger-bench-reads-")
    repo: ProvenanceRepository | None = None
    for n, line in enumerate(sys.stdin):
        cmd, _, arg = line.strip().partition(" ")
        cpu, rss0 = time.process_time(), _rss("VmRSS")
        start = time.perf_counter()
        if cmd == "download":
            claim = ContentClaim.from_dict(json.loads(arg))
            content = ContentRepository(
                base.scoped("stream"),
                ContentRepositorySettings(
                    archive_cleanup_frequency=0,
                    cleanup_on_start=False,
                    **STREAM_REPO,  # type: ignore[arg-type]
                ),
            ).initialize()
            rss0, start = _rss("VmRSS"), time.perf_counter()
            got = content.export_to(claim, _Sink())
        else:
            if cmd == "cold" or repo is None:
                if repo is not None:
                    repo.close()
                ps = replace(ProvenanceSettings(), cache_dir=f"{caches.name}/{n}")
                repo = ProvenanceRepository.open(base.scoped("lookup"), ps, recover=False)
            found = repo.query(Query((SearchTerm("flowfile_uuid", arg),), max_results=100))
            got = len(found)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        reply = {"n": got, "s": wall, "cpu": cpu, "rss": _rss("VmHWM") - rss0}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    if repo is not None:
        repo.close()
    caches.cleanup()


def _rss(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(f.read().split(field + ":")[1].split()[0]) * 1024


class _Sink:
    """Discards what is written (the download's destination)."""

    def write(self, b: bytes) -> int:
        return len(b)


# -- driver ----------------------------------------------------------------------------------
class _Worker:
    def __init__(self, spec: dict[str, str]) -> None:
        code = "from bench.s3_read_clients import serve; serve()"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip

    def ask(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline()
        if not out:
            raise RuntimeError(f"worker died on {line!r}")
        reply: dict[str, Any] = json.loads(out)
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def _once(spec: dict[str, str], line: str) -> dict[str, Any]:
    """`line` answered by a new process (then closed)."""
    w = _Worker(spec)
    try:
        return w.ask(line)
    finally:
        w.close()


def _specs(b: BenchBackend, endpoint: str) -> dict[str, dict[str, str]]:
    store = b.open()
    s = b.settings
    base = {
        "endpoint": endpoint, "key": s.access_key_id or "", "secret": s.secret_access_key or "",
        "region": s.region, "bucket": store.bucket, "prefix": store.prefix,  # type: ignore[attr-defined]
    }  # fmt: skip
    return {c: {**base, "client": c} for c in CLIENTS}


def _prepare(b: BenchBackend, events: int, size: int) -> str:
    """Builds the history (unless `events` is 0) and stores the content; the claim, as JSON."""
    from dataclasses import replace

    from bench.content import STREAM_REPO, STREAM_STORE
    from bench.provenance import build_history
    from storage import open_store
    from storage.content import ContentRepository, ContentRepositorySettings

    if events:
        with tempfile.TemporaryDirectory(prefix="flowledger-bench-reads-") as tmp:
            console.print(f"building {events:,} events: {build_history(b, events, Path(tmp))}")
    store = open_store(b.uri, replace(b.settings, **STREAM_STORE))  # type: ignore[arg-type]
    repo = ContentRepository(
        store.scoped("stream"),
        ContentRepositorySettings(
            archive_cleanup_frequency=0,
            cleanup_on_start=False,
            **STREAM_REPO,  # type: ignore[arg-type]
        ),
    ).initialize()

    class Source:  # size bytes of random MiB blocks, without holding them all
        left = size
        block = os.urandom(MiB)

        def read(self, n: int = -1) -> bytes:
            n = self.left if n < 0 else min(n, self.left)
            self.left -= n
            return (self.block * (n // MiB + 1))[:n]

    claim = repo.import_from(Source())  # type: ignore[arg-type]
    repo.commit()
    return json.dumps(claim.to_dict())


def run(events: int, rounds: int, warm_n: int, size: int) -> dict[str, Any]:
    """`events` 0: the download alone; `size` 0: the lookups alone."""
    from bench.s3_count_proxy import CountingProxy

    res: dict[str, Any] = {c: {"cold": [], "warm": [], "down": []} for c in CLIENTS}
    loads: list[float] = []
    with minio_backend() as b:
        claim = _prepare(b, events, size or MiB)
        specs = _specs(b, b.settings.endpoint_url or "")
        flowfiles = events // PER_FLOWFILE
        warm = {c: _Worker(specs[c]) for c in CLIENTS}
        try:
            for c in CLIENTS if events else ():  # a warm worker's first lookup opens its repo
                warm[c].ask(f"cold {_uuid(1)}")
            for rnd in range(rounds):
                loads.append(os.getloadavg()[0])
                order = list(CLIENTS) if rnd % 2 == 0 else list(reversed(CLIENTS))
                picks = [
                    _uuid((k * 7_919_993 + 12_345 + rnd * 104_729) % flowfiles)
                    for k in range(warm_n + 1)
                    if events
                ]
                for c in order if events else ():
                    r = _once(specs[c], f"cold {picks[0]}")
                    assert r["n"] == PER_FLOWFILE, (c, r)
                    res[c]["cold"].append(r)
                lookups: dict[str, list[dict[str, Any]]] = {c: [] for c in CLIENTS}
                for i, uuid in enumerate(picks[1:]):
                    for c in order if i % 2 == 0 else reversed(order):
                        r = warm[c].ask(f"warm {uuid}")
                        assert r["n"] == PER_FLOWFILE, (c, r)
                        lookups[c].append(r)
                for c in CLIENTS:
                    res[c]["warm"].append(lookups[c])
                for c in order if size else ():
                    r = _once(specs[c], f"download {claim}")
                    assert r["n"] == size, (c, r)
                    res[c]["down"].append(r)
                console.print(f"round {rnd + 1}/{rounds} done (load {loads[-1]:.1f})")
        finally:
            for w in warm.values():
                w.close()
        proxy = CountingProxy(b.settings.endpoint_url or "")
        try:
            counted = _specs(b, proxy.endpoint)
            for c in CLIENTS:
                res[c]["requests"] = _count(proxy, counted[c], claim, flowfiles, size)
        finally:
            proxy.stop()
    res["loads"] = loads
    return res


def _count(
    proxy: Any, spec: dict[str, str], claim: str, flowfiles: int, size: int
) -> dict[str, str]:
    w = _Worker(spec)
    try:
        t0 = time.time()
        if flowfiles:
            w.ask(f"cold {_uuid(3)}")
        t1 = time.time()
        for k in range(5 if flowfiles else 0):
            w.ask(f"warm {_uuid((k * 7_919_993 + 777) % flowfiles)}")
        t2 = time.time()
        if size:
            w.ask(f"download {claim}")
        t3 = time.time()
    finally:
        w.close()
    cold, warm, down = proxy.between(t0, t1), proxy.between(t1, t2), proxy.between(t2, t3)
    per_warm = ", ".join(f"{k} {v / 5:g}" for k, v in sorted(warm.by_kind.items()))
    return {"cold": cold.short(), "warm": per_warm, "download": down.short()}


def _spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def _print(res: dict[str, Any], events: int, rounds: int, size: int) -> None:
    if events:
        _print_lookups(res, events, rounds)
    if size:
        _print_download(res, size)
    t = table("Requests, counted by the proxy", "client", "cold lookup", "per warm lookup",
              "download")  # fmt: skip
    for c in CLIENTS:
        q = res[c]["requests"]
        t.add_row(c, q["cold"], q["warm"], q["download"])
    console.print(t)
    loads = ", ".join(f"{x:.1f}" for x in res["loads"])
    console.print(f"1-minute load at each round's start: {loads}")


def _print_lookups(res: dict[str, Any], events: int, rounds: int) -> None:
    fast = res["s3_fast"]
    t = table(
        f"FlowFile lookup among {events:,} events on MinIO, per client, {rounds} rounds "
        "interleaved — median (min-max) over rounds; ratio: s3_fast's time / the client's",
        "client", "cold ms", "cold ratio", "warm p50 ms", "warm p95 ms", "warm ratio",
        "warm CPU ms",
    )  # fmt: skip
    for c in CLIENTS:
        r = res[c]
        cold = [x["s"] * 1000 for x in r["cold"]]
        cold_ratio = [f["s"] / x["s"] for f, x in zip(fast["cold"], r["cold"], strict=True)]
        p50 = [statistics.median(x["s"] for x in rnd) * 1000 for rnd in r["warm"]]
        p95 = [sorted(x["s"] for x in rnd)[max(0, int(len(rnd) * 0.95) - 1)] * 1000
               for rnd in r["warm"]]  # fmt: skip
        ratio = [
            statistics.median(f["s"] / x["s"] for f, x in zip(fr, xr, strict=True))
            for fr, xr in zip(fast["warm"], r["warm"], strict=True)
        ]
        cpu = [statistics.mean(x["cpu"] for x in rnd) * 1000 for rnd in r["warm"]]
        t.add_row(c, _spread(cold, "{:.0f}"), _spread(cold_ratio), _spread(p50, "{:.1f}"),
                  _spread(p95, "{:.1f}"), _spread(ratio), _spread(cpu, "{:.1f}"))  # fmt: skip
    console.print(t)


def _print_download(res: dict[str, Any], size: int) -> None:
    t = table(
        f"Download of one {size // MiB} MiB content (content repository reader), per client",
        "client", "MiB/s", "ratio", "peak RSS growth (max)", "CPU s",
    )  # fmt: skip
    for c in CLIENTS:
        r = res[c]["down"]
        rates = [size / MiB / x["s"] for x in r]
        ratio = [f["s"] / x["s"] for f, x in zip(res["s3_fast"]["down"], r, strict=True)]
        t.add_row(c, _spread(rates, "{:.0f}"), _spread(ratio),
                  f"{max(x['rss'] for x in r) / MiB:.1f} MiB",
                  _spread([x["cpu"] for x in r]))  # fmt: skip
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench.s3_read_clients", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="200k events, 64 MiB, 2 rounds")
    ap.add_argument("--events", type=int)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--warm", type=int, default=20, help="warm lookups per round")
    ap.add_argument("--size-mib", type=int)
    ap.add_argument("--part", choices=("all", "lookup", "download"), default="all")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    args = ap.parse_args(argv)
    events = args.events or (200_000 if args.quick else 10_000_000)
    rounds = args.rounds or (2 if args.quick else 5)
    size = (args.size_mib or (64 if args.quick else 1024)) * MiB
    events = 0 if args.part == "download" else events
    size = 0 if args.part == "lookup" else size
    res = run(events, rounds, args.warm, size)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    _print(res, events, rounds, size)


if __name__ == "__main__":
    main()
