"""kill -9 during rollover at every step, then recovery: nothing lost, nothing duplicated,
ids continue without gaps (local filesystem and MinIO)."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import threading
from pathlib import Path

from provenance import ProvenanceRepository, ProvenanceSettings
from provenance.crash import ENV, POINTS
from tests.support.backends import Backend
from tests.support.provenance_events import ev

# Our steps, and the timeline's own crash points inside the rollover's commit.
STEPS = (
    *POINTS,
    "commit.requested",
    "commit.inflight",
    "commit.before_log",
    "commit.logged",
    "commit.completed",
)


def _crashing_rollover(backend: Backend, cache: str, point: str) -> None:
    os.environ[ENV] = point
    repo = ProvenanceRepository.open(
        backend.open(), ProvenanceSettings(cache_dir=cache), recover=False
    )
    repo.rollover()


def test_kill_during_rollover_at_every_step(tbackend: Backend, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    cache = str(tmp_path / "cache")
    s = ProvenanceSettings(cache_dir=cache)
    # No maintenance thread: its rollover by time would race the crashing child's.
    repo = ProvenanceRepository.open(tbackend.open(), s, background=False)
    expected = 0
    for point in STEPS:
        repo.register_events([ev(i) for i in range(expected, expected + 7)], sync=True)
        expected += 7
        child = ctx.Process(target=_crashing_rollover, args=(tbackend, cache, point))
        child.start()
        child.join(120)
        assert child.exitcode == -signal.SIGKILL, f"{point}: crash point not reached"

        recovered = ProvenanceRepository.open(tbackend.open(), s)  # restart: recovery runs
        snap = recovered.snapshot()
        assert snap.journals == (), point  # pending rollovers were finished
        got = [e.event_id for e in recovered.get_events(0, 10_000)]
        assert got == list(range(expected)), point
        _, rows = recovered.sql("SELECT count(*), count(DISTINCT event_id) FROM provenance")
        assert rows == [(expected, expected)], point
        # Merged files never overlap: each id lives in exactly one committed file.
        ranges = sorted((f.first_id, f.end_id) for f in snap.files)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges)), point
        recovered.close()
    # Ids continue after all those restarts without a gap.
    assert repo.register_events([ev(0)], sync=True) == [expected]
    repo.close()


def test_constructor_does_no_io_open_recovers(tbackend: Backend, tmp_path: Path) -> None:
    store = tbackend.open()
    s = ProvenanceSettings(cache_dir=str(tmp_path / "cache"))
    writer = ProvenanceRepository.open(store, s, background=False)
    writer.register_events([ev(i) for i in range(5)], sync=True)
    writer.close()  # journals left for the next open to roll over
    requests, threads = store.stats.total(), set(threading.enumerate())
    bare = ProvenanceRepository(store, s, background=True)
    assert store.stats.total() == requests  # no request: nothing read, nothing recovered
    assert set(threading.enumerate()) <= threads  # the maintenance thread waits for open()
    bare.close()
    opened = ProvenanceRepository.open(store, s, background=True)
    assert set(threading.enumerate()) - threads  # open() started the maintenance thread
    assert opened.snapshot().journals == ()  # recovery rolled the journals over
    assert [e.event_id for e in opened.get_events(0, 100)] == list(range(5))
    opened.close()
