"""Journal flushes appended to a writer's log (local backend) and one object per flush (object
stores): kill -9 at every step of a durable flush, torn log tails (truncated mid-block or
mid-header, zero-filled), and a damaged block in the middle of a log."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from provenance import MissingEvents, ProvenanceRepository, ProvenanceSettings
from provenance.crash import ENV, INGEST_POINTS
from provenance.layout import is_log_key
from storage import LOG_HEADER_SIZE, IntegrityError, LogBlock, StoreSettings, open_store, scan_log
from tests.support.backends import Backend
from tests.support.provenance_events import ev

BATCH = 5
STEPS = (
    ("provenance.journal.allocated", 1),
    ("provenance.journal.allocated", 3),
    ("provenance.journal.written", 1),
    ("provenance.journal.written", 4),
)


def _settings(cache: str, **kw: object) -> ProvenanceSettings:
    return ProvenanceSettings(cache_dir=cache, **kw)  # type: ignore[arg-type]


def _ingest_until_killed(backend: Backend, cache: str, at: str, start: int, acked: str) -> None:
    os.environ[ENV] = at
    repo = ProvenanceRepository.open(backend.open(), _settings(cache), background=False)
    n = start
    while True:
        ids = repo.register_events([ev(i) for i in range(n, n + BATCH)], sync=True)
        with open(acked, "a") as f:  # acknowledged: written before the next batch starts
            f.writelines(f"{i} {e}\n" for i, e in zip(range(n, n + BATCH), ids, strict=True))
        n += BATCH


def _killed_writer(backend: Backend, cache: str, at: str, start: int, acked: Path) -> None:
    child = multiprocessing.get_context("spawn").Process(
        target=_ingest_until_killed, args=(backend, cache, at, start, str(acked))
    )
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL, f"{at}: crash point not reached"


def _acked(path: Path) -> dict[int, int]:
    if not path.exists():
        return {}
    return {int(a): int(b) for a, b in (line.split() for line in path.read_text().splitlines())}


def _stored(repo: ProvenanceRepository) -> dict[int, int]:
    _, rows = repo.sql("SELECT flowfile_uuid, event_id FROM provenance")
    out: dict[int, int] = {}
    for uuid, event_id in rows:
        i = int(str(uuid).rsplit("-", 1)[1])
        assert i not in out, f"event {i} stored twice"
        out[i] = int(event_id)
    return out


def test_kill_during_durable_ingest_at_every_step(tbackend: Backend, tmp_path: Path) -> None:
    cache, acked_file = str(tmp_path / "cache"), tmp_path / "acked"
    start = 0
    for point, hit in STEPS:
        assert point in INGEST_POINTS
        _killed_writer(tbackend, cache, f"{point}#{hit}", start, acked_file)
        recovered = ProvenanceRepository.open(tbackend.open(), _settings(cache), background=False)
        stored, acked = _stored(recovered), _acked(acked_file)
        lost = {i: e for i, e in acked.items() if stored.get(i) != e}
        assert not lost, f"{point}#{hit}: acknowledged events lost or renumbered: {lost}"
        ids = sorted(stored.values())
        assert len(set(ids)) == len(ids), point
        # A new writer continues past every id handed out, the dead writer's included.
        [after] = recovered.register_events([ev(10_000 + start)], sync=True)
        assert after > max(ids, default=-1), point
        recovered.close()
        start += 1_000  # each child's events are numbered apart
    final = ProvenanceRepository.open(
        tbackend.open(), _settings(cache, journal_gap_timeout_s=0.0), background=False
    )
    final.rollover()
    stored, acked = _stored(final), _acked(acked_file)
    assert final.snapshot().journals == ()
    assert all(stored.get(i) == e for i, e in acked.items())
    final.close()


def _logs(root: Path) -> list[Path]:
    folder = root / "provenance" / "journals"
    return sorted(p for p in folder.iterdir() if is_log_key(f"journals/{p.name}"))


def _blocks(path: Path) -> list[LogBlock]:
    data = path.read_bytes()
    blocks, _ = scan_log(lambda offset, length: data[offset : offset + length], str(path))
    return blocks


def _local(tmp_path: Path) -> Backend:
    return Backend("local", "file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))


def _tear(path: Path, block: LogBlock, how: str) -> None:
    """What a machine crash during the append of `block` may leave."""
    if how == "truncated mid-block":
        os.truncate(path, block.payload_offset + block.length // 2)
    elif how == "truncated mid-header":
        os.truncate(path, block.offset + LOG_HEADER_SIZE // 2)
    else:  # the zero-filled space ahead of the writer, as if nothing reached the disk
        with open(path, "r+b") as f:
            f.seek(block.offset)
            f.write(bytes(block.end - block.offset))


@pytest.mark.unit
@pytest.mark.parametrize("how", ["truncated mid-block", "truncated mid-header", "zero-filled"])
def test_a_torn_log_tail_keeps_every_acknowledged_event(tmp_path: Path, how: str) -> None:
    backend, cache, acked_file = _local(tmp_path), str(tmp_path / "cache"), tmp_path / "acked"
    # Three flushes acknowledged; the fourth is on disk but the writer dies before being told.
    _killed_writer(backend, cache, "provenance.journal.written#4", 0, acked_file)
    [log] = _logs(tmp_path / "repo")
    blocks = _blocks(log)
    assert len(blocks) == 4
    _tear(log, blocks[3], how)

    repo = ProvenanceRepository.open(backend.open(), _settings(cache), background=False)
    acked = _acked(acked_file)
    assert len(acked) == 3 * BATCH
    assert _stored(repo) == acked  # the torn block was never acknowledged: it is not there
    torn_ids = range(blocks[3].tag[0], blocks[3].tag[1])
    new = repo.register_events([ev(i) for i in range(100, 100 + BATCH)], sync=True)
    assert min(new) >= torn_ids.stop  # ids of the torn block are never handed out again
    journal = next(j for j in repo.snapshot().journals if j.first_id == new[0])
    assert journal.log is not None and journal.log != f"journals/{log.name}"  # a new log
    repo.close()

    final = ProvenanceRepository.open(
        backend.open(), _settings(cache, journal_gap_timeout_s=0.0), background=False
    )
    final.rollover()  # skips the torn block's ids (an open allocation: an honest hole)
    expected = acked | {100 + k: e for k, e in enumerate(new)}
    assert _stored(final) == expected
    assert final.snapshot().journals == ()
    assert _logs(tmp_path / "repo") == []  # merged, and no writer holds them: deleted
    final.close()


def _three_flushes(tmp_path: Path) -> tuple[Path, list[LogBlock]]:
    store = open_store("file://" + str(tmp_path / "repo"))
    repo = ProvenanceRepository.open(store, _settings(str(tmp_path / "c")), background=False)
    for n in range(0, 3 * BATCH, BATCH):
        repo.register_events([ev(i) for i in range(n, n + BATCH)], sync=True)
    repo.close()
    [log] = _logs(tmp_path / "repo")
    blocks = _blocks(log)
    assert len(blocks) == 3
    return log, blocks


@pytest.mark.unit
def test_a_damaged_block_in_the_middle_of_a_log_names_the_log_and_offset(
    tmp_path: Path,
) -> None:
    log, blocks = _three_flushes(tmp_path)
    with open(log, "r+b") as f:  # one bit flipped in the second block's payload
        f.seek(blocks[1].payload_offset + 100)
        byte = f.read(1)
        f.seek(blocks[1].payload_offset + 100)
        f.write(bytes([byte[0] ^ 0x01]))
    store = open_store("file://" + str(tmp_path / "repo"))
    match = rf"{log.name} is corrupt: the block at offset {blocks[1].offset} "
    reader = ProvenanceRepository.open(
        store, _settings(str(tmp_path / "r")), recover=False, background=False
    )
    with pytest.raises(IntegrityError, match=match):
        reader.get_event(0)
    reader.close()
    with pytest.raises(IntegrityError, match=match):
        ProvenanceRepository.open(store, _settings(str(tmp_path / "r2")), background=False)


@pytest.mark.unit
def test_a_damaged_header_hides_the_blocks_after_it_and_is_reported(tmp_path: Path) -> None:
    log, blocks = _three_flushes(tmp_path)
    with open(log, "r+b") as f:  # the second block's header damaged: the log reads as torn
        f.seek(blocks[1].offset + 8)
        f.write(b"\xff\xff\xff\xff")
    store = open_store("file://" + str(tmp_path / "repo"))
    # Its events and the third block's were acknowledged (no open allocation holds them).
    with pytest.raises(MissingEvents):
        ProvenanceRepository.open(store, _settings(str(tmp_path / "r")), background=False)


@pytest.mark.unit
def test_both_rollover_engines_merge_log_blocks_and_delete_the_log(tmp_path: Path) -> None:
    from tests.provenance.test_provenance_ingest import _InlineSpark

    store = open_store("file://" + str(tmp_path / "repo"))
    repo = ProvenanceRepository.open(store, _settings(str(tmp_path / "c")), background=False)
    for n in range(0, 4 * BATCH, BATCH):
        repo.register_events([ev(i) for i in range(n, n + BATCH)], sync=True)
    [first_log] = _logs(tmp_path / "repo")
    result = repo.rollover(engine="spark", spark=_InlineSpark())  # tasks read ranged blocks
    assert (result.events, result.journals) == (4 * BATCH, 4)
    assert _logs(tmp_path / "repo") == []  # merged; its writer moved on to a new log
    later = repo.register_events([ev(i) for i in range(100, 100 + BATCH)], sync=True)
    assert _logs(tmp_path / "repo") != [first_log]
    repo.rollover()
    assert [e.event_id for e in repo.get_events(0, 100)] == [*range(4 * BATCH), *later]
    assert repo.snapshot().journals == () and _logs(tmp_path / "repo") == []
    repo.close()
