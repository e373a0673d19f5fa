"""The claim ledger (batches + CAS checkpoint), claims as JSON, checksums, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import zlib
from pathlib import Path

import pytest

from storage import ObjectStore, StorageError
from storage.content import (
    ClaimLedger,
    ContentClaim,
    ContentRepository,
    ContentRepositoryError,
    ContentRepositorySettings,
    LedgerBatch,
    ResourceClaim,
)
from storage.content.checksum import combine
from storage.content.ledger import BATCHES, CHECKPOINT
from tests.support.cli import run_cli_process
from tests.support.paths import REPO_ROOT


def _batch(deltas: dict[str, int], register: tuple[str, ...] = ()) -> LedgerBatch:
    return LedgerBatch(1.0, {r: (10, 1.0) for r in register}, deltas)


def test_state_is_checkpoint_plus_later_batches(store: ObjectStore) -> None:
    a = ClaimLedger(store, "writer-a")
    a.append(_batch({"c/1/x": 2}, register=("c/1/x",)))
    a.append(_batch({"c/1/x": -1}))
    assert a.checkpoint()
    assert not [o for o in store.list(BATCHES)]  # folded batches are deleted
    a.append(_batch({"c/1/x": 5}))
    b = ClaimLedger(store, "writer-b")
    assert b.refresh()["c/1/x"].count == 6
    assert b.claims["c/1/x"].registered and b.claims["c/1/x"].size == 10


def test_crash_between_checkpoint_and_batch_deletion_counts_once(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = ClaimLedger(store, "writer-a")
    for _ in range(3):
        a.append(_batch({"c/1/x": 1}, register=("c/1/x",)))

    def crash(keys: object) -> None:
        raise StorageError("killed before deleting folded batches")

    real = store.delete_many
    monkeypatch.setattr(store, "delete_many", crash)
    with pytest.raises(ContentRepositoryError):
        a.checkpoint()  # dies deleting the *previous* checkpoint's batches: nothing written
    monkeypatch.setattr(store, "delete_many", lambda keys: None if keys else real(keys))
    assert a.checkpoint()  # checkpoint written, folded batches left behind (the "crash")
    assert len(list(store.list(BATCHES))) == 3
    assert ClaimLedger(store, "r").refresh()["c/1/x"].count == 3  # skipped, not re-counted
    monkeypatch.setattr(store, "delete_many", real)
    b = ClaimLedger(store, "writer-b")
    b.refresh()
    b.append(_batch({"c/1/x": 1}))
    assert b.checkpoint()  # deletes the leftovers of the previous checkpoint first
    assert list(store.list(BATCHES)) == []
    assert ClaimLedger(store, "r").refresh()["c/1/x"].count == 4


def test_concurrent_checkpoints_one_wins_nothing_lost(store: ObjectStore) -> None:
    writers = [ClaimLedger(store, f"w{i}") for i in range(4)]
    for i, w in enumerate(writers):
        for _ in range(5):
            w.append(_batch({f"c/{i}/x": 1, "c/0/shared": 1}))
    barrier = threading.Barrier(4)
    won: list[bool] = []

    def compact(w: ClaimLedger) -> None:
        barrier.wait()
        won.append(w.checkpoint())

    threads = [threading.Thread(target=compact, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won.count(True) >= 1
    state = ClaimLedger(store, "reader").refresh()
    assert state["c/0/shared"].count == 20
    assert all(state[f"c/{i}/x"].count == 5 for i in range(1, 4))
    assert state["c/0/x"].count == 5
    body = json.loads(store.get(CHECKPOINT))
    assert body["writer"] in {f"w{i}" for i in range(4)}


@pytest.mark.unit
def test_claim_json_round_trip_and_errors() -> None:
    claim = ContentClaim(ResourceClaim("default", "17", "1700000000000-abc-3"), 42, 7, "crc32:0")
    assert ContentClaim.from_json(claim.to_json()) == claim
    assert ContentClaim.from_json(claim.to_dict()) == claim
    assert json.loads(claim.to_json())["offset"] == 42
    assert ResourceClaim.from_ref(claim.resource_claim.ref) == claim.resource_claim
    for bad in ["", "[]", '{"container": "x"}', "not json"]:
        with pytest.raises(ValueError, match="content claim"):
            ContentClaim.from_json(bad)


@pytest.mark.unit
def test_crc32_combine_matches_zlib() -> None:
    for n in (0, 1, 7, 1000, 65_537):
        a, b = os.urandom(n // 2 + 3), os.urandom(n)
        assert combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.mark.unit
def test_repository_open_uses_content_prefix(tmp_path: Path) -> None:
    settings = ContentRepositorySettings(archive_cleanup_frequency=0)
    with ContentRepository.open(str(tmp_path / "repo"), settings) as repo:
        claim = repo.write_bytes(b"hi")
    assert (tmp_path / "repo" / "content" / "ledger").is_dir()
    with ContentRepository.open(str(tmp_path / "repo"), settings) as repo:
        assert repo.read_bytes(claim) == b"hi"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_REPO"}
    return run_cli_process(*args, env=env, cwd=REPO_ROOT)  # the checkout, as CI runs


@pytest.mark.unit
def test_cli_put_get_state(tmp_path: Path) -> None:
    repo = str(tmp_path / "repo")
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(100_000))
    put = _cli("content", "put", str(src), "--repo", repo)
    assert put.returncode == 0, put.stderr
    claim = ContentClaim.from_json(put.stdout)
    assert claim.length == 100_000
    out = tmp_path / "out.bin"
    got = _cli("content", "get", put.stdout, "-o", str(out), "--repo", repo)
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == src.read_bytes()
    claim_file = tmp_path / "claim.json"
    claim_file.write_text(put.stdout)
    out2 = tmp_path / "out2.bin"
    got2 = _cli("content", "get", str(claim_file), "-o", str(out2), "--repo", repo)
    assert got2.returncode == 0 and out2.read_bytes() == src.read_bytes()
    st = _cli("content", "state", str(claim_file), "--json", "--repo", repo)
    assert json.loads(st.stdout)["state"] == "active"

    obj = Path(repo) / "content" / "containers" / claim.resource_claim.container
    path = obj / claim.resource_claim.section / claim.resource_claim.identifier
    data = bytearray(path.read_bytes())
    data[5] ^= 1
    path.write_bytes(bytes(data))
    bad = tmp_path / "bad.bin"
    fail = _cli("content", "get", str(claim_file), "-o", str(bad), "--repo", repo)
    assert fail.returncode == 6  # integrity
    assert fail.stderr.startswith("flowledger: error:") and "corrupt" in fail.stderr
    assert fail.stderr.count("\n") == 1 and not bad.exists()
    nonsense = _cli("content", "get", "{}", "-o", str(bad), "--repo", repo)
    assert nonsense.returncode == 2 and "not a content claim" in nonsense.stderr
