"""A deleted committed journal or staged-ingest manifest is reported, never skipped: event
ids are contiguous across committed objects, and the allocator lists the allocations whose
object may honestly be missing (a writer that failed or died before writing it)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from provenance import MissingEvents, ProvenanceRepository
from provenance.ingest import ingest_file
from provenance.staging import manifest_key
from storage import BackendError, ObjectStore, open_store
from tests.support.backends import LOCAL, MINIO, make_backend
from tests.support.paths import REPO_ROOT
from tests.support.provenance_events import ev, settings

ROOT = REPO_ROOT


def _file(tmp_path: Path, name: str, start: int, n: int) -> Path:
    path = tmp_path / name
    rows = (
        {
            "event_type": "RECEIVE",
            "flowfile_uuid": f"ff-{i}",
            "component_id": "c",
            "component_type": "GetFile",
            "file_size": i,
            "transit_uri": "file:/in",
            "event_time": 1_700_000_000_000 + i,
        }
        for i in range(start, start + n)
    )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _repo(root: Path, tmp_path: Path, recover: bool = True, **kw: Any) -> ProvenanceRepository:
    return ProvenanceRepository.open(
        open_store(str(root)), settings(tmp_path, **kw), recover=recover, background=False
    )


def _prov(root: Path) -> ObjectStore:
    return open_store(str(root)).scoped("provenance/")


def _count(repo: ProvenanceRepository) -> int:
    return int(repo.sql("SELECT count(*) FROM provenance")[1][0][0])


@pytest.mark.unit
def test_deleted_last_manifest_is_reported_by_sql_and_restart(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = _repo(root, tmp_path)
    ingest_file(repo, _file(tmp_path, "a.jsonl", 0, 200))
    repo.rollover()
    ingest_file(repo, _file(tmp_path, "b.jsonl", 200, 30))
    repo.close()
    _prov(root).delete_many([manifest_key(200, 230)])

    reader = _repo(root, tmp_path, recover=False)
    with pytest.raises(MissingEvents, match=r"events 200\.\.229 are missing") as err:
        _count(reader)
    assert err.value.ranges == ((200, 230),)
    assert "00000000000000000200.staged.json" in str(err.value)
    with pytest.raises(MissingEvents, match=r"200\.\.229"):
        reader.rollover()
    reader.close()
    # The next writer's start-up (where the id allocator is checked) refuses to go on past it.
    with pytest.raises(MissingEvents, match=r"accept-missing 200 230"):
        _repo(root, tmp_path)
    # Accepting the loss turns it into an honest hole: skipped, ids continue after it.
    _repo(root, tmp_path, recover=False).accept_missing(200, 230)
    repo = _repo(root, tmp_path, journal_gap_timeout_s=0.0)
    assert _count(repo) == 200
    ingest_file(repo, _file(tmp_path, "c.jsonl", 300, 5))
    repo.rollover()
    assert repo.table.committed(fresh=True).high_water == 235
    assert _count(repo) == 205
    repo.close()


@pytest.mark.unit
def test_deleted_manifest_between_others_stops_reads_and_rollover(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = _repo(root, tmp_path, journal_gap_timeout_s=0.0)
    for k in range(3):
        ingest_file(repo, _file(tmp_path, f"{k}.jsonl", k * 10, 10))
    assert _count(repo) == 30
    repo.close()
    _prov(root).delete_many([manifest_key(10, 20)])

    repo = _repo(root, tmp_path, recover=False, journal_gap_timeout_s=0.0)
    for read in (lambda: _count(repo), lambda: repo.get_events(0, 100), repo.rollover):
        with pytest.raises(MissingEvents, match=r"events 10\.\.19 are missing"):
            read()
    # Nothing was merged behind the hole or past it.
    assert repo.table.committed(fresh=True).high_water == 0
    repo.close()


@pytest.mark.unit
def test_deleted_journal_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = _repo(root, tmp_path, journal_log_bytes=0)  # one object per flush
    for i in range(3):
        repo.register_events([ev(i)], sync=True)
    repo.close()
    journals = sorted(i.key for i in _prov(root).list("journals/"))
    assert len(journals) == 3
    _prov(root).delete_many([journals[1]])
    reader = _repo(root, tmp_path, recover=False)
    with pytest.raises(MissingEvents, match=r"events 1\.\.1 are missing"):
        reader.get_event(0)
    reader.close()


@pytest.mark.unit
def test_an_ingest_that_failed_after_taking_ids_leaves_an_honest_hole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids taken by an ingest whose manifest PUT failed are an open allocation: the hole is
    skipped (after `journal_gap_timeout_s`), not reported."""
    root = tmp_path / "repo"
    repo = _repo(root, tmp_path, journal_gap_timeout_s=0.0)
    ingest_file(repo, _file(tmp_path, "a.jsonl", 0, 10))
    real = type(repo.store).put_if_absent

    def refuse_manifests(self: ObjectStore, key: str, data: bytes, *a: Any, **kw: Any) -> Any:
        if key.endswith(".staged.json"):
            raise BackendError("the endpoint refused the manifest", key)
        return real(self, key, data, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(type(repo.store), "put_if_absent", refuse_manifests)
        with pytest.raises(BackendError):
            ingest_file(repo, _file(tmp_path, "b.jsonl", 10, 5))
    ingest_file(repo, _file(tmp_path, "c.jsonl", 15, 5))
    assert _count(repo) == 15
    repo.close()

    repo = _repo(root, tmp_path, journal_gap_timeout_s=0.0)  # restart: rollover skips the hole
    assert repo.table.committed(fresh=True).high_water == 20
    assert _count(repo) == 15
    assert sorted(e.event_id for e in repo.get_events(0, 100)) == [*range(10), *range(15, 20)]
    repo.close()


@pytest.mark.unit
def test_a_writer_killed_after_taking_ids_leaves_an_honest_hole(tmp_path: Path) -> None:
    """A process killed between its id CAS and its journal PUT never reports the ids
    written: the allocation stays open, so the hole it leaves is not taken for a loss."""
    root = tmp_path / "repo"
    code = (
        "import os, sys\n"
        "from provenance import ProvenanceRepository, ProvenanceSettings\n"
        "from storage import open_store\n"
        f"repo = ProvenanceRepository.open(open_store({str(root)!r}), "
        f"ProvenanceSettings(cache_dir={str(tmp_path / 'k')!r}), background=False)\n"
        "repo.ids.allocate(7)\n"
        "os._exit(0)\n"
    )
    repo = _repo(root, tmp_path)
    repo.register_events([ev(0)], sync=True)
    repo.close()
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}
    )
    repo = _repo(root, tmp_path)
    assert repo.register_events([ev(1)], sync=True) == [8]
    assert _count(repo) == 2
    repo.close()


@pytest.mark.parametrize("name", [LOCAL, MINIO])
def test_concurrent_writers_never_look_like_a_loss(
    request: pytest.FixtureRequest, tmp_path: Path, name: str
) -> None:
    """Writers of separate repository objects (separate allocators, as separate processes)
    leave holes while their flushes are in flight; a reader running SQL, lookups and
    rollovers meanwhile never takes one for a missing object. Writers starting together on a
    fresh repository also never take the same ids (the allocator they race to create is read
    back, not taken from the create's answer)."""
    backend = make_backend(request, tmp_path, name)

    def _repo(_: object, cache: Path, recover: bool = True, **kw: Any) -> ProvenanceRepository:
        return ProvenanceRepository.open(
            backend.open(), settings(cache, **kw), recover=recover, background=False
        )

    root = tmp_path / "repo"
    _repo(root, tmp_path).close()
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(k: int) -> None:
        repo = _repo(root, tmp_path / f"w{k}", recover=False, journal_count=4)
        try:
            for i in range(60):
                repo.register_events([ev(k * 1000 + i)], sync=True)
        except BaseException as exc:
            errors.append(exc)
        finally:
            repo.close()

    def read() -> None:
        repo = _repo(root, tmp_path / "r", recover=False)
        try:
            n = 0
            while not stop.is_set():
                _count(repo)
                repo.get_events(0, 1000)
                if n % 5 == 0:
                    repo.rollover()
                n += 1
        except BaseException as exc:
            errors.append(exc)
        finally:
            repo.close()

    writers = [threading.Thread(target=write, args=(k,)) for k in range(3)]
    reader = threading.Thread(target=read)
    reader.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert errors == []
    repo = _repo(root, tmp_path)
    assert _count(repo) == 180
    repo.close()


@pytest.mark.unit
def test_deleted_last_manifest_is_reported_by_events_paging(tmp_path: Path) -> None:
    """`provenance events` (getEvents) pages to the newest event: a page that reaches the end
    of what is held names the missing events instead of ending early."""
    root = tmp_path / "repo"
    repo = _repo(root, tmp_path)
    ingest_file(repo, _file(tmp_path, "a.jsonl", 0, 200))
    repo.rollover()
    ingest_file(repo, _file(tmp_path, "b.jsonl", 200, 30))
    repo.close()
    _prov(root).delete_many([manifest_key(200, 230)])

    reader = _repo(root, tmp_path, recover=False)
    assert [e.event_id for e in reader.get_events(0, 50)][-1] == 49  # a full page: no end seen
    with pytest.raises(MissingEvents, match=r"events 200\.\.229 are missing"):
        reader.get_events(150, 1000)
    reader.close()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "flowledger",
            "provenance",
            "events",
            "--repo",
            str(root),
            "--first",
            "0",
            "--max",
            "1000",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 6, (res.returncode, res.stdout[-300:], res.stderr)
    assert "200..229 are missing" in res.stderr and "accept-missing 200 230" in res.stderr
