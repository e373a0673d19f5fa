"""Durable per-event ingest and lookups over unmerged journals.

Run once per checkout to compare a baseline tree with this one in the same session:

    PYTHONPATH=<tree> .venv/bin/python -m bench.provenance_journals --label <name>

Per 1,000-event batch `register_events(..., sync=True)` on the local store (fsync on), then,
with every journal still unmerged (no rollover): the first lookup pass over 20 FlowFiles
("searchable after ingest"), then warm lookups p50, with the store's request counts.
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


def main() -> None:
    ap = argparse.ArgumentParser(prog="bench.provenance_journals", description=__doc__)
    ap.add_argument("--label", default="this tree")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument(
        "--threads", type=int, default=0, help="N writers at once (group commit); no lookups"
    )
    args = ap.parse_args()
    if args.threads:
        concurrent(args.label, args.events, args.batch, args.threads)
        return
    total, size = args.events, args.batch
    batches = [batch(s, size, total) for s in range(0, total, size)]
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store("file://" + tmp + "/repo")
        repo = ProvenanceRepository.open(
            store, ProvenanceSettings(cache_dir=tmp + "/cache"), background=False
        )
        t0 = time.perf_counter()
        for b in batches:
            repo.register_events(b, sync=True)
        ingest = time.perf_counter() - t0
        journals = len(repo.snapshot().journals)
        picks = [_uuid((k * 7_919 + 12_345) % (total // 5)) for k in range(20)]

        def lookups() -> list[float]:
            out = []
            for u in picks:
                q0 = time.perf_counter()
                found = repo.query(Query((SearchTerm("flowfile_uuid", u),), max_results=100))
                out.append(time.perf_counter() - q0)
                assert len(found) == 5, (u, len(found))
            return out

        before = dict(store.stats.snapshot()) if hasattr(store, "stats") else {}
        first = lookups()
        warm = lookups()
        after = dict(store.stats.snapshot()) if hasattr(store, "stats") else {}
        reqs = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        repo.close()
    print(
        f"| {args.label} | {total / ingest:,.0f} ev/s | {journals} | {sum(first):.2f} s | "
        f"{statistics.median(warm) * 1000:.1f} ms | "
        f"{', '.join(f'{k} {v}' for k, v in sorted(reqs.items()) if v)} |"
    )


if __name__ == "__main__":
    main()
