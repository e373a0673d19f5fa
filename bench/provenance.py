"""Provenance benchmark (same run, same servers):

1. ingest events/s with durable journal flushes (local FS with fsync, MinIO) vs a naive
   one-object-per-event baseline;
2. looking up one FlowFile's events among N million (cold from MinIO, warm) through the term
   index vs DuckDB scanning the same events unindexed;
3. rollover throughput; requests per 1,000 events.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from bench.common import BenchBackend, console, local_backend, minio_backend, table
from provenance import ProvenanceRepository, ProvenanceSettings, Query, SearchTerm

TYPES = ["RECEIVE", "ATTRIBUTES_MODIFIED", "ROUTE", "CONTENT_MODIFIED", "SEND"]
PER_FLOWFILE = len(TYPES)


def flowfile_uuid(f: int) -> str:
    return f"5e1f0c2a-0000-4000-8000{(f * 2654435761) & (2**40 - 1):013d}"


_RANGES: dict[int, tuple[pa.Array, pa.Array, pa.Array, pa.Array]] = {}


def _ranges(n: int) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """Index arrays reused by every batch of the same size (no numpy here)."""
    if n not in _RANGES:
        two = pa.array(range(2 * n), pa.int64())
        pick = pc.if_else(
            pc.equal(pc.bit_wise_and(two, 1), 0), pc.cast(pc.divide(two, 2), pa.int64()), n
        )
        _RANGES[n] = (
            pa.array(range(n), pa.int64()),
            pa.array(range(0, 2 * n + 1, 2), pa.int32()),
            pa.array(["filename", "mime.type"] * n),
            pick,
        )
    return _RANGES[n]


def synthetic(start: int, n: int, total: int) -> pa.Table:
    """Events [start, start+n) of a `total`-event history. Every FlowFile has 5 events, its
    k-th at position k*(total/5)+f: one FlowFile's events are spread over the whole history
    (different row groups and files), as in a busy flow."""
    flowfiles = max(1, total // PER_FLOWFILE)
    base, offsets, keys, pick = _ranges(n)
    pos = pc.add(base, start)
    phase = pc.divide(pos, flowfiles)
    ff = pc.subtract(pos, pc.multiply(phase, flowfiles))
    # An odd multiplier modulo 2**40 is a bijection: unique, but not sequential (compresses
    # like real UUIDs rather than like a counter).
    scrambled = pc.bit_wise_and(pc.multiply(ff, 2654435761), 2**40 - 1)
    digits = pc.utf8_lpad(pc.cast(scrambled, pa.string()), 13, "0")
    uuids = pc.binary_join_element_wise("5e1f0c2a-0000-4000-8000", digits, "")
    etype = pc.take(pa.array(TYPES), pc.min_element_wise(phase, PER_FLOWFILE - 1))
    comp = pc.binary_join_element_wise(
        "processor-", pc.cast(pc.bit_wise_and(ff, 31), pa.string()), ""
    )
    filename = pc.binary_join_element_wise("file-", digits, ".json", "")
    items = pa.concat_arrays([filename, pa.array(["application/json"])]).take(pick)
    attrs = pa.MapArray.from_arrays(offsets, keys, items)
    transit = pc.if_else(
        pc.is_in(etype, pa.array(["RECEIVE", "SEND"])),
        pa.scalar("s3://landing/in"),
        pa.scalar(None, pa.string()),
    )
    rel = pc.if_else(pc.equal(etype, "ROUTE"), pa.scalar("matched"), pa.scalar(None, pa.string()))
    return pa.table(
        {
            "event_time": pc.cast(pc.add(pos, 1_700_000_000_000), pa.timestamp("ms")),
            "event_type": etype,
            "flowfile_uuid": uuids,
            "file_size": pc.add(pc.bit_wise_and(pos, 4095), 100),
            "component_id": comp,
            "component_type": pa.array(["ProcessorType"] * n),
            "transit_uri": transit,
            "relationship": rel,
            "updated_attributes": attrs,
        }
    )


# -- measurements ------------------------------------------------------------------------------
def _settings(cache: Path, **kw: object) -> ProvenanceSettings:
    return ProvenanceSettings(cache_dir=str(cache), **kw)  # type: ignore[arg-type]


def _per_1000(counts: dict[str, int], events: int) -> str:
    total = sum(counts.values())
    return f"{1000 * total / max(1, events):.2f}"


def measure_ingest(b: BenchBackend, n: int, batch: int, tmp: Path) -> dict[str, float]:
    """Durable ingest: every batch returns only after its journal object is written."""
    store = b.open().scoped("ingest")
    repo = ProvenanceRepository.open(
        store,
        _settings(tmp / f"cache-{b.name}", journal_max_events=batch),
        recover=False,
        background=False,  # rollover measured on its own below
    )
    batches = [synthetic(i, min(batch, n - i), n) for i in range(0, n, batch)]
    store.stats.reset()
    start = time.perf_counter()
    for t in batches:
        repo.register_table(t, sync=True)
    ingest_s = time.perf_counter() - start
    ingest_reqs = store.stats.snapshot()
    store.stats.reset()
    r = repo.rollover()
    roll_reqs = store.stats.snapshot()
    repo.close()
    return {
        "events": n,
        "ingest_s": ingest_s,
        "ingest_rate": n / ingest_s,
        "ingest_req_per_1000": float(_per_1000(ingest_reqs, n)),
        "rollover_s": r.seconds,
        "rollover_rate": r.events / r.seconds,
        "rollover_req_per_1000": float(_per_1000(roll_reqs, n)),
        "bytes_in": r.bytes_in,
        "bytes_out": r.bytes_out,
    }


def measure_naive(b: BenchBackend, n: int) -> dict[str, float]:
    """The baseline: one create-only object per event (what a naive store would do)."""
    store = b.open().scoped("naive")
    rows = synthetic(0, n, n).to_pylist()
    store.stats.reset()
    start = time.perf_counter()
    for i, row in enumerate(rows):
        body = json.dumps({**row, "event_time": str(row["event_time"])}, default=str).encode()
        store.put_if_absent(f"naive/{i:020d}.json", body)
    s = time.perf_counter() - start
    return {"events": n, "rate": n / s, "req_per_1000": float(_per_1000(store.stats.snapshot(), n))}


def _timed_query(repo: ProvenanceRepository, uuid: str) -> tuple[float, int]:
    start = time.perf_counter()
    found = repo.query(Query((SearchTerm("flowfile_uuid", uuid),), max_results=100))
    return time.perf_counter() - start, len(found)


def build_history(b: BenchBackend, total: int, tmp: Path) -> dict[str, float]:
    store = b.open().scoped("lookup")
    batch = 250_000 if total >= 1_000_000 else max(1, total // 8)
    repo = ProvenanceRepository.open(
        store,
        _settings(tmp / "cache-build", journal_max_events=batch, rollover_size=2**40),
        recover=False,
        background=False,  # the history's layout is set by the rollover below
    )
    start = time.perf_counter()
    for i in range(0, total, batch):
        repo.register_table(synthetic(i, min(batch, total - i), total), sync=True)
    ingest_s = time.perf_counter() - start
    # Several merged files, as a long-running repository would have.
    files_wanted = 4 if total >= 1_000_000 else 2
    backlog = sum(j.size for j in repo.snapshot().journals)
    repo.close()
    repo = ProvenanceRepository.open(
        store,
        _settings(tmp / "cache-build", rollover_size=backlog // files_wanted + 1),
        recover=False,
        background=False,
    )
    r = repo.rollover()
    roll_s, events = r.seconds, r.events
    repo.close()
    return {"ingest_s": ingest_s, "rollover_s": roll_s, "rolled": events}


def measure_lookup(b: BenchBackend, total: int, tmp: Path, samples: int) -> dict[str, object]:
    built = build_history(b, total, tmp)
    flowfiles = total // PER_FLOWFILE
    picks = [flowfile_uuid((k * 7_919_993 + 12_345) % flowfiles) for k in range(samples + 1)]
    # Cold: a new process's view: no footers, no blocks, no local files.
    store = b.open().scoped("lookup")
    repo = ProvenanceRepository.open(store, _settings(tmp / "cache-cold"), recover=False)
    store.stats.reset()
    cold_s, cold_n = _timed_query(repo, picks[0])
    cold_reqs = store.stats.snapshot()
    stats = repo.reader.last_stats
    warm = []
    store.stats.reset()
    cpu0 = time.process_time()
    for u in picks[1:]:
        s, n = _timed_query(repo, u)
        assert n == PER_FLOWFILE, (u, n)
        warm.append(s)
    warm_cpu = (time.process_time() - cpu0) / len(warm)
    warm_reqs = sum(store.stats.snapshot().values()) / len(warm)
    hot = [_timed_query(repo, picks[1])[0] for _ in range(samples)]
    snap = repo.snapshot()
    files = len(snap.files)
    stored = sum(f.size for f in snap.files)
    # Local cache of the immutable files (what DuckDB needs anyway here: no httpfs).
    t0 = time.perf_counter()
    paths = [repo.source.download(f.events_key) for f in snap.files]
    for f in snap.files:
        if f.index_key:
            repo.source.download(f.index_key)
    download_s = time.perf_counter() - t0
    local_repo = ProvenanceRepository.open(
        b.open().scoped("lookup"), _settings(tmp / "cache-cold"), recover=False
    )
    local = [_timed_query(local_repo, u)[0] for u in picks[1:]]
    local_repo.close()
    repo.close()
    # Baseline: DuckDB scanning the same events, unindexed (row-group stats cannot prune a
    # UUID), over the same local files.
    con = duckdb.connect()
    files_sql = "[" + ", ".join(f"'{p}'" for p in paths) + "]"
    q = f"SELECT * FROM read_parquet({files_sql}) WHERE flowfile_uuid = ?"
    duck = []
    for u in picks[1:]:
        t0 = time.perf_counter()
        rows = con.execute(q, [u]).fetchall()
        duck.append(time.perf_counter() - t0)
        assert len(rows) == PER_FLOWFILE
    return {
        **built,
        "total": total,
        "files": files,
        "stored_bytes": stored,
        "cold_s": cold_s,
        "cold_found": cold_n,
        "cold_requests": sum(cold_reqs.values()),
        "cold_row_groups": stats.row_groups_read,
        "cold_index_row_groups": stats.index_row_groups_read,
        "warm_s": statistics.median(warm),
        "warm_cpu_s": warm_cpu,
        "warm_requests": warm_reqs,
        "hot_s": statistics.median(hot),
        "local_s": statistics.median(local),
        "download_s": download_s,
        "duck_s": statistics.median(duck),
    }


def _ms(s: float) -> str:
    return f"{s * 1000:,.1f} ms"


def _rate(r: float) -> str:
    return f"{r:,.0f}/s"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench.provenance", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--events", type=int, help="events in the lookup history (10M; quick 200k)")
    ap.add_argument("--part", choices=["all", "ingest", "lookup"], default="all")
    args = ap.parse_args(argv)
    ingest_n = 200_000 if args.quick else 2_000_000
    batch = 50_000
    naive_n = {"local": 300 if args.quick else 2_000, "minio": 200 if args.quick else 1_000}
    total = args.events or (200_000 if args.quick else 10_000_000)
    samples = 3 if args.quick else 7
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-prov-") as tmpdir:
        tmp = Path(tmpdir)
        ingest: dict[str, dict[str, float]] = {}
        naive: dict[str, dict[str, float]] = {}
        lookup: dict[str, object] = {}
        with local_backend() as local, minio_backend() as minio:
            for b in (local, minio) if args.part != "lookup" else ():
                console.print(f"ingest on {b.name} ({ingest_n:,} events, {batch:,} per flush)")
                ingest[b.name] = measure_ingest(b, ingest_n, batch, tmp)
                naive[b.name] = measure_naive(b, naive_n[b.name])
            if args.part != "ingest":
                console.print(f"lookup among {total:,} events on MinIO (building the history)")
                lookup = measure_lookup(minio, total, tmp, samples)
    if ingest:
        _print_ingest(ingest, naive)
    if lookup:
        _print_lookup(lookup)
    console.print(f"load average during the run: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")


def _print_ingest(ingest: dict[str, dict[str, float]], naive: dict[str, dict[str, float]]) -> None:

    t = table(
        "Provenance ingest, durable flushes (one process)",
        "backend",
        "events/s",
        "naive 1 object/event",
        "ratio",
        "goal",
        "req/1000 ev",
        "naive req/1000 ev",
    )
    goals = {"local": 500_000, "minio": 200_000}
    for name, r in ingest.items():
        ratio = r["ingest_rate"] / naive[name]["rate"]
        ok = r["ingest_rate"] >= goals[name] and ratio >= 1000
        t.add_row(
            name,
            _rate(r["ingest_rate"]),
            _rate(naive[name]["rate"]),
            f"{ratio:,.0f}x",
            f"≥{goals[name]:,}/s, ≥1000x: {'met' if ok else 'NOT met'}",
            f"{r['ingest_req_per_1000']:.2f}",
            f"{naive[name]['req_per_1000']:.0f}",
        )
    console.print(t)
    t = table(
        "Rollover (journals -> sorted zstd Parquet + term index, one instant)",
        "backend",
        "events",
        "seconds",
        "events/s",
        "journal MB",
        "merged MB",
        "req/1000 ev",
    )
    for name, r in ingest.items():
        t.add_row(
            name,
            f"{r['events']:,.0f}",
            f"{r['rollover_s']:.2f}",
            _rate(r["rollover_rate"]),
            f"{r['bytes_in'] / 1e6:.1f}",
            f"{r['bytes_out'] / 1e6:.1f}",
            f"{r['rollover_req_per_1000']:.2f}",
        )
    console.print(t)


def _print_lookup(lookup: dict[str, object]) -> None:
    L = lookup
    t = table(
        f"Lookup of one FlowFile's 5 events among {L['total']:,} on MinIO "
        f"({L['files']} files, {L['stored_bytes'] / 1e6:.0f} MB)",
        "case",
        "latency",
        "vs DuckDB scan",
        "goal",
    )
    duck = float(L["duck_s"])  # type: ignore[arg-type]
    for label, key, goal in (
        (f"cold: new reader, {L['cold_requests']} requests", "cold_s", 0.5),
        (
            f"warm: footers cached, other FlowFile ({L['warm_requests']:.1f} requests, "
            f"{float(L['warm_cpu_s']) * 1000:.0f} ms CPU each)",  # type: ignore[arg-type]
            "warm_s",
            0.05,
        ),
        ("hot: same FlowFile again", "hot_s", 0.05),
        ("local cache of the files, other FlowFile", "local_s", 0.05),
    ):
        v = float(L[key])  # type: ignore[arg-type]
        t.add_row(
            label,
            _ms(v),
            f"{duck / v:,.1f}x faster",
            f"≤{goal * 1000:.0f} ms: {'met' if v <= goal else 'NOT met'}",
        )
    t.add_row("baseline: DuckDB scan of the same local files", _ms(duck), "1x", "")
    t.add_row(
        "baseline cold: download every file + DuckDB scan",
        _ms(float(L["download_s"]) + duck),
        "",
        "",
    )  # type: ignore[arg-type]
    console.print(t)
    console.print(
        f"history built in {L['ingest_s']:.1f}s ingest + {L['rollover_s']:.1f}s rollover "
        f"({L['rolled']:,} events); cold lookup read {L['cold_index_row_groups']} index and "
        f"{L['cold_row_groups']} data row groups"
    )


if __name__ == "__main__":
    main()
