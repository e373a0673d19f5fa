"""Archival benchmark (same run, same servers):

1. archiving 10,000 instants: time and requests of one archival run vs a baseline that
   archives one object per instant (GET + PUT per instant, as without packing);
2. active timeline load time as the total history grows from 100 to 100,000 instants
   (goal: flat, within 1.2x), vs the same history left on the active timeline;
3. archived timeline load of 100,000 instants (goal <= 1 s on local FS, <= 3 s on MinIO;
   Hudi's LSM timeline: 1,000 instants ~10 ms, 10,000 instant times ~32 ms).

History is fabricated with the archive's own writers (encode_archive, the manifest): the
commit log keeps every position (it is never archived), archive files hold 10,000 instants
each (the size merging produces), the active timeline keeps 30 commits (Hudi's default max).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from bench.common import BenchBackend, console, fmt_requests, local_backend, minio_backend, table
from storage import ObjectStore, StoreSettings, open_store
from timeline.archive import ArchivalSettings, ArchivedInstant, ArchivedTimeline, Archiver
from timeline.archive.format import encode_archive
from timeline.archive.layout import archive_file_key
from timeline.archive.manifest import ArchiveFile, Manifest, add_ranges, swap
from timeline.archive.view import load_active
from timeline.instant import COMMIT, Instant, State, format_time
from timeline.layout import instant_key, log_key
from timeline.metadata import DataFile, Entry, write_metadata
from timeline.store import TimelineStore

ACTIVE = 30
PER_FILE = 10_000
BASE = 1_767_225_600_000  # 2026-01-01 in ms


def _time(k: int) -> str:
    from datetime import UTC, datetime

    return format_time(datetime.fromtimestamp((BASE + k * 1000) / 1000, tz=UTC))


def _entry(k: int) -> Entry:
    t = _time(k)
    f = DataFile(f"data/{t}/part-{k}.parquet", 4096, 100, "", f"fg-{k}")
    return Entry(k, t, COMMIT, "bench", write_metadata("insert", [f]))


def _parallel(store: ObjectStore, fn: object, items: range) -> None:
    workers = 1 if store.uri.startswith("file:") else 32
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(fn, items))  # type: ignore[arg-type]


def _fast(store: ObjectStore) -> ObjectStore:
    """Fabricating history on the local FS needs no fsync (the measured runs keep it)."""
    if store.uri.startswith("file:"):
        return open_store(store.uri, StoreSettings(fsync=False))
    return store


def _fabricate_active(store: ObjectStore, ks: range) -> None:
    """Commits as the commit path leaves them: requested, inflight, log entry, completed."""
    store = _fast(store)

    def one(k: int) -> None:
        e = _entry(k)
        body = e.encode()
        store.put_if_absent(instant_key(Instant(e.time, COMMIT, State.REQUESTED)), b"{}")
        store.put_if_absent(instant_key(Instant(e.time, COMMIT, State.INFLIGHT)), b"{}")
        store.put_if_absent(log_key(k), body)
        store.put_if_absent(instant_key(Instant(e.time, COMMIT, State.COMPLETED, k)), body)

    _parallel(store, one, ks)


def _fabricate_archived(store: ObjectStore, history: int, with_log: bool = True) -> None:
    """`history` archived commits: log positions 1..history, archive files, manifest."""
    store = _fast(store)
    if with_log:
        _parallel(
            store,
            lambda k: store.put_if_absent(log_key(k), _entry(k).encode()),
            range(1, history + 1),
        )
    files = []
    for lo in range(1, history + 1, PER_FILE):
        recs = []
        for k in range(lo, min(history, lo + PER_FILE - 1) + 1):
            e = _entry(k)
            recs.append(ArchivedInstant(e.time, COMMIT, "completed", k, "bench", e.encode(), None))
        data = encode_archive(recs, 10)
        key = archive_file_key(recs[0].time, recs[-1].time, uuid.uuid4().hex[:16])
        store.put_if_absent(key, data)
        files.append(ArchiveFile(key, recs[0].time, recs[-1].time, len(recs), len(data)))
    m = Manifest(tuple(files), add_ranges((), range(1, history + 1)), _time(history))
    swap(store, Manifest(), m)


def archive_cost(
    backend: BenchBackend, n: int, batches: list[int]
) -> list[tuple[str, float, str, int]]:
    """One archival run of `n` instants per delete batch size, then the baseline."""
    rows = []
    for batch in batches:
        store = backend.open().scoped(f"archive-cost-{uuid.uuid4().hex[:6]}")
        _fabricate_active(store, range(1, n + 21))
        settings = ArchivalSettings(
            keep_min_commits=20,
            keep_max_commits=30,
            archive_merge_enable=False,
            archive_completed_delete_batch=batch,
        )
        store.stats.reset()
        start = time.perf_counter()
        result = Archiver(TimelineStore(store), settings).run()
        took = time.perf_counter() - start
        assert len(result.archived) == n, len(result.archived)
        how = "one by one" if batch == 1 else f"{batch} per request"
        rows.append(
            (
                f"archival run, 1 Avro file (completed deleted {how})",
                took,
                fmt_requests(store.stats.snapshot()),
                store.stats.total(),
            )
        )

    base = backend.open().scoped(f"archive-naive-{uuid.uuid4().hex[:6]}")
    _fabricate_active(base, range(1, n + 21))
    base.stats.reset()
    start = time.perf_counter()
    listed = [o.key for o in base.list("_timeline/instants/")]
    completed = [k for k in listed if ".completed." in k][:n]

    def naive(key: str) -> None:  # one archive object per instant
        base.put_if_absent("_timeline/naive-archive/" + key.rsplit("/", 1)[-1], base.get(key))

    with ThreadPoolExecutor(1 if base.uri.startswith("file:") else 32) as pool:
        list(pool.map(naive, completed))
    times = {k.rsplit("/", 1)[-1].split(".")[0] for k in completed}
    base.delete_many([k for k in listed if k.rsplit("/", 1)[-1].split(".")[0] in times])
    took_b = time.perf_counter() - start
    rows.append(
        (
            "baseline: one archive object per instant (batched deletes)",
            took_b,
            fmt_requests(base.stats.snapshot()),
            base.stats.total(),
        )
    )
    return rows


def _median(fn: object, reps: int) -> float:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def active_loads(
    backend: BenchBackend, sizes: list[int], baseline_max: int
) -> list[tuple[int, float, int, float | None]]:
    out = []
    for h in sizes:
        store = backend.open().scoped(f"active-{h}-{uuid.uuid4().hex[:6]}")
        _fabricate_archived(store, h)
        _fabricate_active(store, range(h + 1, h + ACTIVE + 1))
        tl = TimelineStore(store)
        assert len(load_active(tl).timeline) == ACTIVE
        store.stats.reset()
        t = _median(lambda s=store: load_active(TimelineStore(s)), 5)
        reqs = store.stats.total() // 5
        base_t = None
        if h <= baseline_max:  # the same history left active (no archival)
            b = backend.open().scoped(f"noarchive-{h}-{uuid.uuid4().hex[:6]}")
            _fabricate_active(b, range(1, h + ACTIVE + 1))
            base_t = _median(lambda b=b: TimelineStore(b).list_instants(), 3)
        out.append((h, t, reqs, base_t))
    return out


def archived_loads(backend: BenchBackend, n: int) -> list[tuple[str, float, int]]:
    store = backend.open().scoped(f"archived-{n}-{uuid.uuid4().hex[:6]}")
    _fabricate_archived(store, n, with_log=False)  # reading the archive needs no log
    rows = []
    for label, fn in (
        (f"{n:,} instant times", lambda: ArchivedTimeline(store).instant_times()),
        (f"{n:,} instants as a Timeline", lambda: ArchivedTimeline(store).timeline()),
        (
            f"{n:,} instants with metadata",
            lambda: ArchivedTimeline(store).records(with_bodies=True),
        ),
        (
            "1,000 instants (range, 1 file)",
            lambda: ArchivedTimeline(store).records(_time(1), _time(1000)),
        ),
    ):
        store.stats.reset()
        t = _median(fn, 3)
        rows.append((label, t, store.stats.total() // 3))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.archival")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--local-only", action="store_true", help="skip MinIO")
    args = parser.parse_args(argv)
    plans = {  # backend -> (archive n, delete batches, history sizes, no-archival max, archived n)
        "local": (10_000, [1, 1000], [100, 1_000, 10_000, 100_000], 10_000, 100_000),
        "minio": (10_000, [1000], [100, 1_000, 10_000], 1_000, 100_000),
    }
    if args.quick:
        plans = {
            "local": (1_000, [1, 1000], [100, 1_000, 2_000], 1_000, 10_000),
            "minio": (300, [1, 300], [100, 300], 300, 10_000),
        }
    makers = {"local": local_backend, "minio": minio_backend}
    for name, (n_archive, batches, sizes, base_max, n_archived) in plans.items():
        if args.local_only and name != "local":
            continue
        with makers[name]() as backend:
            cost = table(
                f"{name}: archive {n_archive:,} instants",
                "how",
                "time s",
                "instants/s",
                "requests",
                "total",
            )
            for how, took, reqs, total in archive_cost(backend, n_archive, batches):
                cost.add_row(how, f"{took:.2f}", f"{n_archive / took:,.0f}", reqs, str(total))
            console.print(cost)
            loads = table(
                f"{name}: active timeline load ({ACTIVE} active instants) vs total history",
                "history",
                "load ms",
                "requests",
                "vs smallest",
                "no archival ms",
            )
            results = active_loads(backend, sizes, base_max)
            first = results[0][1]
            for h, t, n_req, base_t in results:
                loads.add_row(
                    f"{h:,}",
                    f"{t * 1000:.1f}",
                    str(n_req),
                    f"{t / first:.2f}x",
                    "" if base_t is None else f"{base_t * 1000:.1f}",
                )
            console.print(loads)
            arch = table(f"{name}: archived timeline load", "what", "time ms", "requests")
            for label, t, n_get in archived_loads(backend, n_archived):
                arch.add_row(label, f"{t * 1000:.1f}", str(n_get))
            console.print(arch)


if __name__ == "__main__":
    main()
