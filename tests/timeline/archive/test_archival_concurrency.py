"""Two archivers racing each other and a writer: no instant is duplicated or lost; readers
never see a hole; the commit path never reads an archive object."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from storage import NotFound, ObjectStore
from tests.support.backends import Backend
from timeline import Table, TableSettings
from timeline.archive import (
    ArchivalSettings,
    ArchiveConflict,
    ArchivedTimeline,
    Archiver,
    auto_archive_of,
    combined_timeline,
    load_active,
    read_manifest,
)
from timeline.archive.layout import ARCHIVE, MANIFEST
from timeline.instant import WRITE_ACTIONS
from timeline.layout import INSTANTS, LOG, log_key
from timeline.store import TimelineStore

RACE = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_files_batch_size=3)
COMMITS = 24


def _writer(backend: Backend, prefix: str, n: int, done: Any, runs: Any) -> None:
    table = Table.open(backend.open().scoped(prefix))
    for k in range(n):
        if k == n // 2:  # under load the archivers may start late: let one run land first,
            deadline = time.monotonic() + 60  # so the second half is archived by another run
            while runs.value < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
        txn = table.begin()
        txn.commit()
    done.set()


def _archiver(backend: Backend, prefix: str, done: Any, runs: Any) -> None:
    table = Table.open(backend.open().scoped(prefix))
    archiver = Archiver(table, RACE)
    while True:
        finished = done.is_set()
        try:
            if archiver.run().file:
                with runs.get_lock():
                    runs.value += 1
        except ArchiveConflict:
            continue  # the other archiver holds the manifest: try again
        if finished:
            return


def _commit_times(store: ObjectStore) -> list[str]:
    return [
        i.time for i in combined_timeline(Table(store)).completed() if i.action in WRITE_ACTIONS
    ]


def test_two_archivers_and_a_writer(tbackend: Backend) -> None:
    prefix = "tables/race"
    store = tbackend.open().scoped(prefix)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        ["timeline", "pyarrow", "fastavro", "boto3", "tests.support.backends"]
    )
    done = ctx.Event()
    runs = ctx.Value("i", 0)
    procs = [ctx.Process(target=_writer, args=(tbackend, prefix, COMMITS, done, runs))]
    procs += [ctx.Process(target=_archiver, args=(tbackend, prefix, done, runs)) for _ in range(2)]
    for p in procs:
        p.start()
    actives: list[list[str]] = []
    combined: list[list[str]] = []
    stop = threading.Event()

    def watch() -> None:  # a concurrent reader
        reader = Table(tbackend.open().scoped(prefix))
        while not stop.is_set():
            actives.append([i.time for i in load_active(reader.tl).timeline.completed()])
            combined.append(_commit_times(reader.store))

    # The reader runs in a pool so that its failure fails this test (not the whole run), and
    # it is stopped whatever happens to the processes.
    with ThreadPoolExecutor(1) as pool:
        watcher = pool.submit(watch)
        try:
            for p in procs:
                p.join(240)
                assert p.exitcode == 0
        finally:
            stop.set()
            for p in procs:
                if p.is_alive():
                    p.kill()
        watcher.result()

    final = _commit_times(store)
    assert len(final) == COMMITS
    assert runs.value >= 2
    m = read_manifest(store)
    assert m.pending is None
    records = ArchivedTimeline(store).records()
    assert sum(f.count for f in m.files) == len(records)  # no instant archived twice
    seen = Counter((i.time, i.action) for i in combined_timeline(Table(store)))
    assert set(seen.values()) == {1}
    for view in actives:  # no hole: a contiguous run of the commits
        if view:
            start = final.index(view[0])
            assert view == final[start : start + len(view)], view
    for view in combined:  # nothing lost: a prefix of the commits
        assert view == final[: len(view)], view


class CountingStore:
    """Wraps a store and records the key of every read."""

    def __init__(self, inner: ObjectStore) -> None:
        self._inner = inner
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get(self, key: str, *a: Any, **kw: Any) -> bytes:
        self.reads.append(key)
        return self._inner.get(key, *a, **kw)

    def get_object(self, key: str) -> Any:
        self.reads.append(key)
        return self._inner.get_object(key)

    def open_read(self, key: str, *a: Any, **kw: Any) -> Any:
        self.reads.append(key)
        return self._inner.open_read(key, *a, **kw)

    def head(self, key: str) -> Any:
        self.reads.append(key)
        return self._inner.head(key)


class StaleInstantsListing:
    """Wraps a store and answers every LIST of the instants folder with one taken earlier:
    a reader whose LIST ran before a write completed, and the completion and an archival run
    of it both landed before the reader read the manifest (a slow reader on a loaded host)."""

    def __init__(self, inner: ObjectStore, listed: list[Any]) -> None:
        self._inner = inner
        self._listed = listed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def list(self, prefix: str = "", start_after: str | None = None) -> Any:
        if prefix == INSTANTS and start_after is None:
            return iter(self._listed)
        return self._inner.list(prefix, start_after)


def test_a_listing_older_than_an_archived_completion(tbackend: Backend) -> None:
    """A pending state listed before its instant completed and was archived is not read as
    pending: it would hide the archived completion from the combined view."""
    store = tbackend.open().scoped("tables/stale")
    table = Table.open(store)
    first = table.begin()
    listed = list(store.list(INSTANTS))  # the reader's LIST: the first write is pending
    first.commit()
    commits = [first.instant_time]
    for _ in range(3):
        txn = table.begin()
        txn.commit()
        commits.append(txn.instant_time)
    archived = Archiver(table, RACE).run().archived
    assert first.instant_time in {i.time for i in archived}
    reader = TimelineStore(StaleInstantsListing(store, listed))  # type: ignore[arg-type]
    view = load_active(reader)
    assert not view.timeline.pending(), view.timeline  # it completed: not pending
    assert _commit_times_of(reader) == commits  # nothing lost


class ReaderOfEarlier(StaleInstantsListing):
    """Also answers the reader's first GET of the manifest, and its GETs of log positions
    from `unborn` on, as they were when the listing was taken: the reader loaded its active
    view then and reads the archive files later."""

    def __init__(self, inner: ObjectStore, listed: list[Any], unborn: int) -> None:
        super().__init__(inner, listed)
        self._manifest: Any = inner.get_object(MANIFEST)
        self._unborn = unborn

    def get_object(self, key: str) -> Any:
        if key == MANIFEST and self._manifest is not None:
            got, self._manifest = self._manifest, None
            return got
        return self._inner.get_object(key)

    def get(self, key: str, *a: Any, **kw: Any) -> bytes:
        if key.startswith(LOG) and key >= log_key(self._unborn):
            raise NotFound(f"{key} was not written yet", key)
        return self._inner.get(key, *a, **kw)


def test_an_archive_merged_after_the_active_view_was_loaded(tbackend: Backend) -> None:
    """The reader's active view shows a write pending; the archive files of its manifest are
    merged away before it reads them, and the newer manifest archives that write completed:
    the completion is in the answer, not hidden by the stale pending state."""
    store = tbackend.open().scoped("tables/merged")
    table = Table.open(store)
    commits = []
    for _ in range(4):
        txn = table.begin()
        txn.commit()
        commits.append(txn.instant_time)
    no_merge = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False)
    assert Archiver(table, no_merge).run().file  # one file: the two oldest
    pending = table.begin()
    listed = list(store.list(INSTANTS))
    reader, probe = (
        TimelineStore(ReaderOfEarlier(store, listed, 5))  # type: ignore[arg-type]
        for _ in range(2)
    )
    pending.commit()
    commits.append(pending.instant_time)
    for _ in range(2):
        txn = table.begin()
        txn.commit()
        commits.append(txn.instant_time)
    merging = ArchivalSettings(
        keep_min_commits=2, keep_max_commits=3, archive_merge_files_batch_size=2
    )
    result = Archiver(table, merging).run()
    assert pending.instant_time in {i.time for i in result.archived} and result.merged
    # the view is the one of then: the write pending, the files of then merged away
    assert load_active(probe).timeline.pending().times() == [pending.instant_time]
    assert _commit_times_of(reader) == commits[:5]  # the archive has it completed


def _commit_times_of(tl: TimelineStore) -> list[str]:
    return [i.time for i in combined_timeline(tl).completed() if i.action in WRITE_ACTIONS]


def test_commit_path_never_reads_an_archive_object(tbackend: Backend) -> None:
    counting = CountingStore(tbackend.open().scoped("tables/count"))
    archival = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, auto_archive=True)
    table = Table.open(counting, TableSettings(archival=archival))  # type: ignore[arg-type]
    for k in range(12):  # automatic archival after every commit
        table.write(pa.table({"id": [k]}))
    m = read_manifest(counting._inner)
    assert len(m.files) >= 3, "automatic archival did not run"
    assert not [k for k in counting.reads if k.startswith(ARCHIVE)]
    # an explicit `timeline archive` run does read them (to merge), off the commit path
    Archiver(
        table,
        ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_files_batch_size=3),
    ).run()
    assert [k for k in counting.reads if k.startswith(ARCHIVE)]


def test_async_archival_after_commit(tbackend: Backend) -> None:
    archival = ArchivalSettings(
        keep_min_commits=2,
        keep_max_commits=3,
        auto_archive=True,
        async_archive=True,
        archive_merge_files_batch_size=2,
    )
    table = Table.open(tbackend.open().scoped("tables/async"), TableSettings(archival=archival))
    hook = auto_archive_of(table)
    assert hook is not None
    commits = []
    for _ in range(8):
        txn = table.begin()
        txn.commit()
        commits.append(txn.instant_time)
    hook.wait()
    hook(table)  # one more run that surely sees the last commit
    hook.wait()
    active = load_active(table.tl).timeline.completed()
    assert 2 <= len(active) <= 3
    assert read_manifest(table.store).files, "asynchronous archival did not run"
    assert _commit_times(table.store) == commits
