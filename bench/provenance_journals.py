"""Durable per-event ingest and lookups over unmerged journals.

Durable batches `register_events(..., sync=True)` on the local store (fsync on; 200,000 events
in batches of 200: 1,000 journals), then, with every journal still unmerged (no rollover): the
first lookup pass over 20 FlowFiles ("searchable after ingest"), warm lookups p50, and as the
baseline the same lookups with the journal filters off; then, after rollover, the lookups on a
fresh repository object with an empty cache (cold). Request counts per lookup from the store.
Run it as a script to time another tree's library with this bench:

    PYTHONPATH=<tree> .venv/bin/python -P bench/provenance_journals.py --label <name>

(`-P`: the tree on PYTHONPATH is imported, not the bench folder's `provenance.py`.)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time

from provenance import ProvenanceEvent, ProvenanceRepository, ProvenanceSettings, Query, SearchTerm
from storage import open_store

TYPES = ["RECEIVE", "ATTRIBUTES_MODIFIED", "ROUTE", "CONTENT_MODIFIED", "SEND"]


def _uuid(f: int) -> str:
    return f"5e1f0c2a-0000-4000-8000-{f:012d}"


def batch(start: int, n: int, total: int) -> list[ProvenanceEvent]:
    flowfiles = total // 5
    out = []
    for p in range(start, start + n):
        phase, f = divmod(p, flowfiles)
        et = TYPES[phase]
        out.append(
            ProvenanceEvent(
                event_type=et,
                flowfile_uuid=_uuid(f),
                component_id=f"processor-{phase * 8 + (f & 7)}",
                component_type="Processor",
                file_size=100 + (p & 4095),
                event_time=1_700_000_000_000 + p // 1000,
                transit_uri="http://x/in" if et in ("RECEIVE", "SEND") else None,
                relationship="matched" if et == "ROUTE" else None,
                updated_attributes={"uuid": _uuid(f), "filename": f"file-{f}.json"},
            )
        )
    return out


def concurrent(label: str, total: int, size: int, threads: int) -> None:
    """`threads` writers each registering durable batches of `size` at the same time."""
    per = total // threads
    work = [[batch(k * per + s, size, total) for s in range(0, per, size)] for k in range(threads)]
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store("file://" + tmp + "/repo")
        repo = ProvenanceRepository.open(
            store, ProvenanceSettings(cache_dir=tmp + "/cache"), background=False
        )
        store.stats.reset()

        def run(batches: list[list[ProvenanceEvent]]) -> None:
            for b in batches:
                repo.register_events(b, sync=True)

        pool = [threading.Thread(target=run, args=(w,)) for w in work]
        t0 = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        took = time.perf_counter() - t0
        reqs = store.stats.snapshot()
        journals = len(repo.snapshot().journals)
        repo.close()
    calls = sum(len(w) for w in work)
    print(
        f"| {label} | {threads} x {size} | {calls / took:,.0f} calls/s | "
        f"{per * threads / took:,.0f} ev/s | {journals} journals for {calls} calls | "
        f"{', '.join(f'{k} {v}' for k, v in sorted(reqs.items()) if v)} |"
    )


def _requests(store: object) -> dict[str, int]:
    stats = getattr(store, "stats", None)
    return dict(stats.snapshot()) if stats is not None else {}


def _delta(before: dict[str, int], after: dict[str, int], per: int) -> str:
    diff = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return ", ".join(f"{k} {v / per:g}" for k, v in sorted(diff.items()) if v) or "none"


def _lookups(
    repo: ProvenanceRepository, picks: list[str], rounds: int = 1
) -> tuple[list[float], str]:
    """Seconds per lookup of each FlowFile in `picks` (`rounds` times), requests per lookup."""
    before = _requests(repo.store)
    out = []
    for _ in range(rounds):
        for u in picks:
            q0 = time.perf_counter()
            found = repo.query(Query((SearchTerm("flowfile_uuid", u),), max_results=100))
            out.append(time.perf_counter() - q0)
            assert len(found) == 5, (u, len(found))
    return out, _delta(before, _requests(repo.store), len(out))


def lookups(label: str, total: int, size: int, rounds: int) -> None:
    """FlowFile lookups over 1,000 unmerged journals (the writer's process), against the same
    lookups with the journal filters off (a reader without `flowfile_uuid` indexed scans every
    journal); then, after rollover, on a fresh repository object with an empty cache (the NiFi
    harness's cold lookup)."""
    batches = [batch(s, size, total) for s in range(0, total, size)]
    picks = [_uuid((k * 7_919 + 12_345) % (total // 5)) for k in range(20)]
    ms = 1000.0
    with tempfile.TemporaryDirectory() as tmp:
        url = "file://" + tmp + "/repo"
        store = open_store(url)
        repo = ProvenanceRepository.open(
            store, ProvenanceSettings(cache_dir=tmp + "/cache"), background=False
        )
        t0 = time.perf_counter()
        for b in batches:
            repo.register_events(b, sync=True)
        ingest = time.perf_counter() - t0
        journals = len(repo.snapshot().journals)
        first, first_reqs = _lookups(repo, picks)
        warm, warm_reqs = _lookups(repo, picks, rounds)
        unindexed = tuple(f for f in ProvenanceSettings().indexed_fields if f != "flowfile_uuid")
        scan = ProvenanceRepository.open(
            open_store(url),
            ProvenanceSettings(cache_dir=tmp + "/scan", indexed_fields=unindexed),
            recover=False,
        )
        _lookups(scan, picks[:1])
        off, off_reqs = _lookups(scan, picks[1:6])
        scan.close()
        repo.rollover()
        repo.close()
        fresh = ProvenanceRepository.open(
            open_store(url), ProvenanceSettings(cache_dir=tmp + "/cold"), recover=False
        )
        cold, cold_reqs = _lookups(fresh, picks)
        fresh.close()
    p50 = statistics.median
    print(
        f"{label}: {total:,} events in batches of {size:,} (sync=True): {total / ingest:,.0f} ev/s"
    )
    print("| measure | ms | requests per lookup |")
    print("|---|---|---|")
    print(
        f"| first pass of 20 over {journals:,} unmerged journals, total | "
        f"{sum(first) * ms:,.1f} | {first_reqs} |"
    )
    print(
        f"| lookup over {journals:,} unmerged journals, p50 of {len(warm)} | "
        f"**{p50(warm) * ms:.2f}** | {warm_reqs} |"
    )
    print(
        f"| baseline: the same, journal filters off (every journal scanned), p50 of "
        f"{len(off)} | {p50(off) * ms:.2f} | {off_reqs} |"
    )
    print(f"| after rollover, fresh repository object: first lookup | {cold[0] * ms:.1f} | |")
    print(f"| the same, p50 of {len(cold)} (cold) | **{p50(cold) * ms:.2f}** | {cold_reqs} |")
    print(f"| ratio filters off / on (unmerged p50) | {p50(off) / p50(warm):.1f}x | |")


def main() -> None:
    ap = argparse.ArgumentParser(prog="bench.provenance_journals", description=__doc__)
    ap.add_argument("--label", default="this tree")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5, help="warm lookup passes over 20 FlowFiles")
    ap.add_argument(
        "--threads", type=int, default=0, help="N writers at once (group commit); no lookups"
    )
    args = ap.parse_args()
    if args.threads:
        concurrent(args.label, args.events, args.batch, args.threads)
        return
    lookups(args.label, args.events, args.batch, args.rounds)


if __name__ == "__main__":
    main()
