"""MinIO SIGKILLed by its PID at the commit point of a rollover, a content put and an
archival run (after applying the request, before answering it), and restarted 2 s later on
the same port and data folder: the operation learns that it landed and reports success, and
everything it committed is there exactly once (docs/faults.md). Table writes and ingests
are killed the same way in test_faults_tables.py and test_faults_provenance.py."""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from provenance import ProvenanceRepository, ProvenanceSettings
from storage import ObjectStore, open_store
from storage.content import ContentRepository
from tests.support.crash_minio import CrashingMinio
from tests.support.fault_proxy import DROP, Fault
from tests.support.provenance_events import ev
from timeline import Table
from timeline.archive import ArchivalSettings, Archiver, combined_timeline, read_manifest
from timeline.instant import WRITE_ACTIONS

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrashingMinio]:
    s = CrashingMinio(tmp_path_factory.mktemp("crashing-minio"))
    yield s
    s.stop()


def _arm(server: CrashingMinio, match: Callable[[str, str], bool], nth: int = 1) -> list[int]:
    """Kill MinIO when it applied the `nth` request `match` accepts, before it answers."""
    seen: list[int] = []
    restarted: list[threading.Thread] = []

    def crash() -> None:
        restarted.append(server.crash_for(2.0))

    def rule(method: str, path: str) -> Fault:
        if match(method, path):
            seen.append(1)
            if len(seen) == nth:
                return Fault(DROP, on_answer=crash)
        return Fault.forward()

    server.proxy.rule = rule
    return seen


def _settle(server: CrashingMinio, kills: int) -> None:
    """The kill happened (and MinIO is back: the operation read through it)."""
    assert server.kills == kills
    server.proxy.rule = lambda m, p: Fault.forward()


def _store(server: CrashingMinio, name: str) -> ObjectStore:
    return open_store(f"s3://{server.endpoint.new_bucket()}/{name}", server.endpoint.settings())


def test_rollover_killed_at_its_commit(server: CrashingMinio, tmp_path: Path) -> None:
    store = _store(server, "repo")
    settings = ProvenanceSettings(cache_dir=str(tmp_path / "cache"))
    repo = ProvenanceRepository.open(store, settings, background=False)
    for b in range(3):
        repo.register_events([ev(100 * b + i) for i in range(20)], sync=True)
    kills = server.kills
    _arm(server, lambda m, p: m == "PUT" and "/provenance/table/_timeline/log/" in p)
    result = repo.rollover()
    _settle(server, kills + 1)
    assert result is not None
    repo.close()
    direct = ProvenanceRepository.open(open_store(store.uri, server.direct.settings()), settings)
    assert direct.snapshot().journals == ()
    _, rows = direct.sql("SELECT count(*), count(DISTINCT event_id) FROM provenance")
    direct.close()
    assert rows == [(60, 60)]


def test_content_put_killed_at_its_ledger_batch(server: CrashingMinio) -> None:
    store = _store(server, "repo")
    body = random.Random(3).randbytes(2_500_000)
    kills = server.kills
    _arm(server, lambda m, p: m == "PUT" and "/ledger/batches/" in p)
    with contextlib.closing(ContentRepository.open(store)) as repo:  # stops its cleanup thread
        with repo.transaction() as session, session.write() as w:
            w.write(body)
        _settle(server, kills + 1)
    assert w.claim is not None
    with (
        contextlib.closing(open_store(store.uri, server.direct.settings())) as direct_store,
        contextlib.closing(ContentRepository.open(direct_store)) as direct,
    ):
        assert direct.read_bytes(w.claim) == body
        assert direct.get_claimant_count(w.claim) == 1


def test_archival_killed_at_its_manifest_commit(server: CrashingMinio) -> None:
    store = _store(server, "tables/t")
    table = Table.open(store)
    commits = [table.write(pa.table({"k": [k]})).time for k in range(6)]
    kills = server.kills
    # The manifest is swapped to claim the run, then to commit it: kill at the commit.
    _arm(server, lambda m, p: m == "PUT" and p.split("?")[0].endswith("archive.manifest"), nth=2)
    settings = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False)
    Archiver(Table.open(store), settings).run()
    _settle(server, kills + 1)
    reread = Table.open(open_store(store.uri, server.direct.settings()))
    assert read_manifest(reread.store).pending is None
    combined = combined_timeline(reread)
    assert set(Counter((i.time, i.action) for i in combined).values()) == {1}
    assert [i.time for i in combined.completed() if i.action in WRITE_ACTIONS] == commits
    assert reread.snapshot().rows == 6
