"""What a durable (`sync=True`) flush fsyncs on the local backend, and that the id allocator,
written without fsync, is never trusted after a machine crash lost or tore that write: the
events a returned `register_events` acknowledged survive and keep their ids, and new events
never take an id twice (whether the next writer runs recovery or not)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import storage.append_log
import storage.local
from provenance import ProvenanceRepository
from provenance.ids import ALLOCATOR_KEY
from storage import ObjectStore, open_store
from tests.support.provenance_events import ev, settings


def _store(tmp_path: Path) -> ObjectStore:
    return open_store("file://" + str(tmp_path / "repo"))  # fsync on (the default)


@pytest.mark.unit
def test_a_durable_flush_fsyncs_the_journal_and_its_folder_not_the_allocator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One object per flush (what object stores do; the local backend with logs turned off).
    repo = ProvenanceRepository.open(
        _store(tmp_path), settings(tmp_path, journal_log_bytes=0), background=False
    )
    repo.register_events([ev(0)], sync=True)  # the allocator exists from now on
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        synced.append(os.fstat(fd).st_ino)

    monkeypatch.setattr(storage.local.os, "fsync", fsync)
    ids = repo.register_events([ev(i) for i in range(1, 4)], sync=True)
    monkeypatch.setattr(storage.local.os, "fsync", real)
    root = tmp_path / "repo" / "provenance"
    [journal] = [j for j in repo.snapshot().journals if j.first_id == ids[0]]
    journal_path = root / journal.key
    # Before returning: the journal's bytes and its name (its folder), and nothing else.
    assert sorted(synced) == sorted([journal_path.stat().st_ino, journal_path.parent.stat().st_ino])
    assert (root / ALLOCATOR_KEY).stat().st_ino not in synced
    repo.close()


@pytest.mark.unit
def test_a_durable_flush_into_the_log_is_one_fdatasync_of_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = ProvenanceRepository.open(_store(tmp_path), settings(tmp_path), background=False)
    repo.register_events([ev(0)], sync=True)  # the allocator and the writer's log exist now
    synced: list[tuple[str, int]] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        synced.append(("fsync", os.fstat(fd).st_ino))

    def fdatasync(fd: int) -> None:
        real_fdatasync(fd)
        synced.append(("fdatasync", os.fstat(fd).st_ino))

    with monkeypatch.context() as m:
        for module in (storage.local.os, storage.append_log.os):
            m.setattr(module, "fsync", fsync)
            m.setattr(module, "fdatasync", fdatasync)
        ids = repo.register_events([ev(i) for i in range(1, 4)], sync=True)
    root = tmp_path / "repo" / "provenance"
    [journal] = [j for j in repo.snapshot().journals if j.first_id == ids[0]]
    assert journal.log is not None
    # No new name, no folder fsync, no allocator fsync: one data flush of the log.
    assert synced == [("fdatasync", (root / journal.log).stat().st_ino)]
    repo.close()


def _lose(path: Path, how: str, before: bytes) -> None:
    """What a machine crash may leave of a write that was not fsynced."""
    if how == "moved back":
        path.write_bytes(before)
    elif how == "torn":
        path.write_bytes(b"")
    else:
        path.unlink()


@pytest.mark.unit
@pytest.mark.parametrize("how", ["moved back", "torn", "missing"])
@pytest.mark.parametrize("recover", [True, False])
def test_allocator_write_lost_in_a_crash_never_reuses_an_acknowledged_id(
    tmp_path: Path, how: str, recover: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    repo = ProvenanceRepository.open(store, settings(tmp_path), background=False)
    first = repo.register_events([ev(i) for i in range(5)], sync=True)
    repo.rollover()  # ids 0-4 merged: the high-water mark is 5
    allocator = tmp_path / "repo" / "provenance" / ALLOCATOR_KEY
    before = allocator.read_bytes()  # next id 5, durable (the CAS before it was too)
    acked = repo.register_events([ev(i) for i in range(5, 12)], sync=True)  # ids 5-11
    # A crash now: the journal of ids 5-11 was fsynced, the allocator's move to 12 was not.
    _lose(allocator, how, before)
    caplog.set_level(logging.WARNING, "flowledger.provenance")
    # A process after the crash; recover=False is what Spark's lineage hook opens with.
    writer = ProvenanceRepository.open(
        _store(tmp_path), settings(tmp_path), recover=recover, background=False
    )
    new = writer.register_events([ev(i) for i in range(100, 104)], sync=True)
    assert min(new) >= 12, (how, new)
    if how == "torn":
        assert ALLOCATOR_KEY in caplog.text
    writer.close()
    repo = ProvenanceRepository.open(_store(tmp_path), settings(tmp_path), background=False)
    events = repo.get_events(0, 1000)
    got = {e.flowfile_uuid: e.event_id for e in events}
    assert len(events) == len(got) == 16
    for i, event_id in zip([*range(12), *range(100, 104)], first + acked + new, strict=True):
        assert got[f"00000000-0000-0000-0000-{i:012d}"] == event_id
    repo.close()


@pytest.mark.unit
def test_journals_encoded_while_the_id_cas_runs_carry_the_ids_it_gave(tmp_path: Path) -> None:
    # Two writers taking turns: each one's guess of its next ids (made while its CAS runs)
    # is wrong every time after the first, so its journal must be encoded again.
    writers = [
        ProvenanceRepository.open(_store(tmp_path), settings(tmp_path), background=False)
        for _ in range(2)
    ]
    acked: dict[str, int] = {}
    for turn in range(6):
        batch = [ev(turn * 10 + i) for i in range(3)]
        ids = writers[turn % 2].register_events(batch, sync=True)
        acked |= {e.flowfile_uuid: i for e, i in zip(batch, ids, strict=True)}
    for w in writers:
        w.close()
    reader = ProvenanceRepository.open(_store(tmp_path), settings(tmp_path), background=False)
    stored = {e.flowfile_uuid: e.event_id for e in reader.get_events(0, 100)}
    assert stored == acked
    assert sorted(stored.values()) == list(range(18))
    reader.close()
