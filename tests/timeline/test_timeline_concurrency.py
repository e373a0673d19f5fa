"""Several writers on one table without locks: threads and spawned processes, on the local
backend and MinIO. Disjoint writes all complete; of conflicting writes exactly one does."""

from __future__ import annotations

import multiprocessing
import queue
import threading
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from storage import NotFound, ObjectStore, UnknownOutcome
from tests.support.backends import Backend
from timeline import (
    REPLACE_COMMIT,
    CommitConflict,
    CommitUnknownOutcome,
    DataFile,
    Table,
    TableSettings,
)
from timeline.archive import combined_timeline
from timeline.layout import LOG

TABLE = "tables/race"


def _commit(table: Table, rows: int, group: str = "", partition: str = "") -> str:
    txn = table.begin()
    key = txn.data_key(partition, f"{uuid.uuid4().hex}.bin")
    table.store.put(key, b"r" * rows)
    txn.add(DataFile(key, rows, rows, partition, group))
    return txn.commit({"rows": str(rows)}).time


def _check_log(store: ObjectStore, table: Table) -> None:
    """Completion order is a gapless sequence; every completed instant has one position."""
    seqs = [int(o.key[len(LOG) :]) for o in store.list(LOG)]
    assert seqs == list(range(1, len(seqs) + 1))
    completed = combined_timeline(table).completed()  # archived + active
    assert sorted(i.seq or 0 for i in completed) == seqs
    assert len({i.time for i in completed}) == len(completed)


def test_disjoint_writers_threads_all_complete(tbackend: Backend) -> None:
    store = tbackend.open().scoped(TABLE)
    Table.open(store)
    results: list[str] = []
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        table = Table.open(tbackend.open().scoped(TABLE))
        try:
            for _ in range(5):
                results.append(_commit(table, w + 1, partition=f"w{w}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == len(set(results)) == 40
    table = Table.open(store)
    snap = table.snapshot()
    assert len(snap.files) == 40 and snap.rows == sum((w + 1) * 5 for w in range(8))
    _check_log(store, table)


def test_conflicting_writers_threads_one_winner(tbackend: Backend) -> None:
    store = tbackend.open().scoped(TABLE)
    Table.open(store)
    for rnd in range(2):
        barrier = threading.Barrier(6)
        outcome: dict[int, Any] = {}

        def writer(
            w: int,
            rnd: int = rnd,
            barrier: threading.Barrier = barrier,
            outcome: dict[int, Any] = outcome,
        ) -> None:
            table = Table.open(tbackend.open().scoped(TABLE))
            txn = table.begin()
            key = txn.data_key(name=f"w{w}.bin")
            table.store.put(key, b"x")
            txn.add(DataFile(key, 1, 1, file_group=f"hot-{rnd}"))
            barrier.wait()
            try:
                outcome[w] = txn.commit().time
            except CommitConflict as err:
                outcome[w] = err

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [v for v in outcome.values() if isinstance(v, str)]
        losers = [v for v in outcome.values() if isinstance(v, CommitConflict)]
        assert len(winners) == 1 and len(losers) == 5
        assert all(exc.winner == winners[0] for exc in losers)
        assert all("file group 'hot-" in str(exc) for exc in losers)
    table = Table.open(store)
    assert len(table.snapshot().files) == 2
    assert len(list(store.list("data/"))) == 2  # the losers' files were rolled back
    _check_log(store, table)


def test_overwrite_conflicts_with_write_into_the_partition(tbackend: Backend) -> None:
    store = tbackend.open().scoped(TABLE)
    a, b = Table.open(store), Table.open(tbackend.open().scoped(TABLE))
    _commit(a, 1, partition="p=1")
    over = a.begin(REPLACE_COMMIT, operation="insert_overwrite")
    key = over.data_key("p=1", "new.bin")
    store.put(key, b"n")
    over.add(DataFile(key, 1, 1, "p=1"))
    over.replace_partitions(["p=1"])
    other = _commit(b, 2, partition="p=1")  # lands first
    _commit(b, 3, partition="p=2")  # another partition: no conflict either way
    with pytest.raises(CommitConflict) as info:
        over.commit()
    assert info.value.winner == other and "p=1" in str(info.value)


# -- 8 processes x 50 commits -------------------------------------------------------------------
WRITERS, COMMITS, HOT_EVERY = 8, 50, 10


def _race_process(backend: Backend, w: int, barrier: Any, out: multiprocessing.Queue[Any]) -> None:
    table = Table.open(backend.open().scoped(TABLE))
    done: list[tuple[str, int, str, str]] = []
    try:
        for k in range(COMMITS):
            if k % HOT_EVERY == HOT_EVERY - 1:  # everybody writes file group hot-k
                txn = table.begin()
                key = txn.data_key(name=f"hot-{k}-w{w}.bin")
                table.store.put(key, b"h")
                txn.add(DataFile(key, 1, 100 + w, file_group=f"hot-{k}"))
                barrier.wait(timeout=120)
                try:
                    done.append(("hot", k, txn.commit().time, ""))
                except CommitConflict as exc:
                    done.append(("lost", k, txn.instant_time, exc.winner))
            else:
                done.append(("own", k, _commit(table, w + 1, partition=f"w{w}"), ""))
        out.put((w, done, None))
    except BaseException as exc:  # report instead of hanging the parent
        out.put((w, done, repr(exc)))
        barrier.abort()


def test_eight_processes_fifty_commits(tbackend: Backend) -> None:
    store = tbackend.open().scoped(TABLE)
    Table.open(store)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    out: multiprocessing.Queue[Any] = ctx.Queue()
    procs = [
        ctx.Process(target=_race_process, args=(tbackend, w, barrier, out)) for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        try:
            results.append(out.get(timeout=300))
        except queue.Empty:
            break
    for p in procs:
        p.join(timeout=30)
    assert all(err is None for _, _, err in results), [e for _, _, e in results if e]
    assert len(results) == WRITERS

    rows = [r for _, done, _ in results for r in done]
    own = [r for r in rows if r[0] == "own"]
    hot = [r for r in rows if r[0] == "hot"]
    lost = [r for r in rows if r[0] == "lost"]
    hot_rounds = COMMITS // HOT_EVERY
    assert len(own) == WRITERS * (COMMITS - hot_rounds)
    # every conflict has exactly one winner, and every loser names it
    assert Counter(k for _, k, _, _ in hot) == {k: 1 for k in range(9, COMMITS, HOT_EVERY)}
    winner_of = {k: t for _, k, t, _ in hot}
    assert all(winner == winner_of[k] for _, k, _, winner in lost)
    assert len(lost) == hot_rounds * (WRITERS - 1)

    table = Table.open(store)
    snap = table.snapshot()
    committed = {t for kind, _, t, _ in rows if kind in ("own", "hot")}
    assert len(committed) == len(own) + len(hot)  # no duplicated instant
    # none lost: archival is on by default (keep 20-30), so archived + active
    assert {i.time for i in combined_timeline(table).completed()} == committed
    assert len(snap.files) == len(committed)
    expected_rows = sum(w + 1 for w, done, _ in results for r in done if r[0] == "own")
    hot_rows = sum(f.rows for f in snap.files if f.file_group.startswith("hot-"))
    assert snap.rows - hot_rows == expected_rows
    assert all(100 <= f.rows < 100 + WRITERS for f in snap.files if f.file_group)
    assert table.timeline().pending().empty()
    _check_log(store, table)


# -- unknown outcomes of the completing write ----------------------------------------------------
def _flaky(store: ObjectStore, mode: str) -> list[str]:
    """Make log writes report UnknownOutcome once (after or without landing)."""
    real_put, real_get = store.put_if_absent, store.get
    calls: list[str] = []

    def put_if_absent(key: str, data: bytes) -> Any:
        if key.startswith(LOG) and not calls:
            calls.append(key)
            if mode == "landed":
                real_put(key, data)
            raise UnknownOutcome(f"simulated timeout on {key}")
        if key.startswith(LOG) and mode == "always":
            raise UnknownOutcome(f"simulated timeout on {key}")
        return real_put(key, data)

    def get(key: str, start: int = 0, length: int | None = None) -> bytes:
        if key.startswith(LOG) and mode == "always":
            raise UnknownOutcome(f"simulated timeout reading {key}")
        return real_get(key, start, length)

    store.put_if_absent = put_if_absent  # type: ignore[method-assign]
    store.get = get  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("mode", ["landed", "lost"])
def test_unknown_outcome_is_resolved_by_reading_back(
    tbackend: Backend,
    mode: str,
) -> None:
    store = tbackend.open().scoped(TABLE)
    table = Table.open(store)
    _commit(table, 1)
    calls = _flaky(store, mode)
    t = _commit(table, 2)
    assert calls  # the fault was injected
    fresh = Table.open(tbackend.open().scoped(TABLE))
    assert fresh.timeline().completed().get(t) is not None
    assert fresh.snapshot().rows == 3
    _check_log(store, fresh)


def test_unknown_outcome_that_cannot_be_resolved(tbackend: Backend) -> None:
    store = tbackend.open().scoped(TABLE)
    table = Table.open(store, TableSettings())
    _flaky(store, "always")
    with pytest.raises(CommitUnknownOutcome):
        _commit(table, 1)
    with pytest.raises(NotFound):
        tbackend.open().scoped(TABLE).get(f"{LOG}00000000000000000001")


def test_unknown_outcome_of_table_write_keeps_its_files(tbackend: Backend) -> None:
    """`Table.write` aborts on errors, but not after a completion whose outcome is unknown:
    had the log write landed, deleting the files would break a committed snapshot."""
    store = tbackend.open().scoped(TABLE)
    table = Table.open(store)
    _flaky(store, "always")  # the log write times out, and so does reading it back
    with pytest.raises(CommitUnknownOutcome):
        table.write(pa.table({"a": [1, 2]}))
    fresh = Table.open(tbackend.open().scoped(TABLE))
    [pending] = fresh.timeline().pending()
    assert list(fresh.store.list(f"data/{pending.time}/"))  # left for recovery to decide
