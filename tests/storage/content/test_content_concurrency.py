"""Threads and processes writing at once; kill -9 during writes and during archive cleanup."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from storage import ObjectStore
from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings
from tests.support.backends import Backend

QUIET = ContentRepositorySettings(archive_cleanup_frequency=0)


def _payload(tag: str, i: int, size: int) -> bytes:
    seed = hashlib.sha256(f"{tag}/{i}".encode()).digest()
    return (seed * (size // 32 + 1))[:size]


def _durable_counts(root: ObjectStore) -> dict[str, int]:
    repo = ContentRepository(
        root, ContentRepositorySettings(archive_cleanup_frequency=0)
    ).initialize()
    counts = {
        ref: rec.count
        for ref, rec in repo.ledger.claims.items()
        if rec.registered and not rec.destroyed
    }
    repo.close()
    return counts


def _objects(root: ObjectStore) -> set[str]:
    prefix = "containers/"
    return {o.key[len(prefix) :] for o in root.list(prefix)}


def test_threads_write_and_commit_concurrently(store: ObjectStore) -> None:
    root = store.scoped("content")
    repo = ContentRepository(
        root, ContentRepositorySettings(archive_cleanup_frequency=0)
    ).initialize()
    results: list[tuple[ContentClaim, bytes]] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        rnd = random.Random(t)
        own = repo.session() if t % 2 else None
        for i in range(60):
            data = _payload(f"t{t}", i, rnd.randrange(0, 40_000))
            claim = own.write_bytes(data) if own else repo.write_bytes(data)
            assert repo.read_bytes(claim) == data  # readable at once, sealed or not
            with lock:
                results.append((claim, data))
            if i % 15 == 14:
                if own:
                    own.commit()
                else:
                    repo.commit()  # commits every thread's default-session work so far
        if own:
            own.commit()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    repo.close()

    again = ContentRepository(root, QUIET).initialize()
    assert len(results) == 480
    for claim, data in results:
        assert again.read_bytes(claim) == data
    per_rc = Counter(c.resource_claim.ref for c, _ in results)
    counts = {c.resource_claim.ref: again.get_claimant_count(c) for c, _ in results}
    assert counts == dict(per_rc)
    assert _objects(root) == set(per_rc)
    again.close()


def _process_writer(args: tuple[Backend, str, int]) -> list[tuple[str, str]]:
    backend, tag, n = args
    root = backend.open().scoped("content")
    repo = ContentRepository(
        root, ContentRepositorySettings(archive_cleanup_frequency=0)
    ).initialize()
    out = []
    rnd = random.Random(tag)
    for batch in range(n // 20):
        with repo.transaction() as session:
            for i in range(20):
                k = batch * 20 + i
                data = _payload(tag, k, rnd.randrange(0, 20_000))
                claim = session.write_bytes(data)
                out.append((claim.to_json(), hashlib.sha256(data).hexdigest()))
    repo.checkpoint()  # every process compacts at the end: CAS races between them
    repo.close()
    return out


def test_processes_write_concurrently_and_compact(backend: Backend) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        results = pool.map(_process_writer, [(backend, f"p{i}", 100) for i in range(3)])
    root = backend.open().scoped("content")
    repo = ContentRepository(root, QUIET).initialize()
    claims = [(ContentClaim.from_json(c), h) for r in results for c, h in r]
    assert len(claims) == 300
    for claim, digest in claims:
        assert hashlib.sha256(repo.read_bytes(claim)).hexdigest() == digest
    per_rc = Counter(c.resource_claim.ref for c, _ in claims)
    assert len({c.resource_claim.identifier.split("-")[1] for c, _ in claims}) == 3
    repo.checkpoint()
    repo.close()
    assert _durable_counts(root) == dict(per_rc)


# -- kill -9 ------------------------------------------------------------------------------------
def _crash_writer(backend: Backend, log_path: str, tag: str) -> None:
    """Writes sessions forever; after each commit, logs the committed claims (fsynced)."""
    root = backend.open().scoped("content")
    settings = ContentRepositorySettings(
        archive_cleanup_frequency=0, max_appendable_size=50_000, large_content_threshold=200_000
    )
    repo = ContentRepository(root, settings).initialize()
    rnd = random.Random(tag)
    with open(log_path, "a") as log:
        for batch in range(100_000):
            session = repo.session()
            written = []
            for i in range(8):
                k = batch * 8 + i
                size = rnd.choice([0, 10, 3_000, 30_000, 300_000])
                claim = session.write_bytes(_payload(tag, k, size))
                written.append({"claim": claim.to_json(), "k": k, "size": size})
            session.commit()
            for w in written:
                log.write(json.dumps(w) + "\n")
            log.flush()
            os.fsync(log.fileno())


def _crash_archiver(backend: Backend, log_path: str, tag: str) -> None:
    """Loops: keep some contents, drop others, destroy the dropped ones, compact often."""
    root = backend.open().scoped("content")
    settings = ContentRepositorySettings(
        archive_cleanup_frequency=0,
        max_appendable_size=1,  # one resource claim per content: every drop is destructible
        archive_max_retention=0,
        ledger_checkpoint_batches=3,
        orphan_grace_period=0,
    )
    repo = ContentRepository(root, settings).initialize()
    with open(log_path, "a") as log:
        for batch in range(100_000):
            kept, dropped = [], []
            with repo.transaction() as session:
                for i in range(6):
                    k = batch * 6 + i
                    claim = session.write_bytes(_payload(tag, k, 100 + k % 500))
                    (kept if i % 2 else dropped).append({"claim": claim.to_json(), "k": k})
            with repo.transaction() as session:
                for d in dropped:
                    session.decrement(ContentClaim.from_json(d["claim"]))
            for w in kept:
                log.write(json.dumps({**w, "size": 100 + w["k"] % 500}) + "\n")
            log.flush()
            os.fsync(log.fileno())
            repo.run_archive_cleanup()


def _run_and_kill(target: object, backend: Backend, log_path: Path, tag: str, lines: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=target, args=(backend, str(log_path), tag))
    proc.start()
    deadline = time.time() + 120
    while time.time() < deadline:
        if log_path.exists() and log_path.read_text().count("\n") >= lines:
            break
        assert proc.is_alive(), f"writer exited early with {proc.exitcode}"
        time.sleep(0.05)
    time.sleep(random.uniform(0, 0.3))  # land the kill anywhere in the next operations
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert proc.exitcode == -signal.SIGKILL


def _verify_after_crash(backend: Backend, log_path: Path, tag: str) -> None:
    root = backend.open().scoped("content")
    settings = ContentRepositorySettings(
        archive_cleanup_frequency=0, orphan_grace_period=0, archive_max_retention=0
    )
    repo = ContentRepository(root, settings).initialize()  # cleanup on start archives the orphans
    committed = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert committed
    for entry in committed:
        claim = ContentClaim.from_json(entry["claim"])
        assert repo.read_bytes(claim) == _payload(tag, entry["k"], entry["size"])
    repo.run_archive_cleanup()  # retention 0: every unreferenced object goes
    repo.checkpoint()
    counts = {r: rec.count for r, rec in repo.ledger.claims.items() if rec.registered}
    live = {ref for ref, n in counts.items() if n > 0}
    assert {ContentClaim.from_json(e["claim"]).resource_claim.ref for e in committed} <= live
    assert _objects(root) == live  # nothing unreferenced is left
    repo.close()
    assert _objects(root) == live


def test_kill9_during_writes_then_restart(backend: Backend, tmp_path: Path) -> None:
    first, second = tmp_path / "w1.jsonl", tmp_path / "w2.jsonl"
    _run_and_kill(_crash_writer, backend, first, "w1", 40)
    _verify_after_crash(backend, first, "w1")
    _run_and_kill(_crash_writer, backend, second, "w2", 40)  # a second life, same repository
    _verify_after_crash(backend, second, "w2")
    _verify_after_crash(backend, first, "w1")


def test_kill9_during_archive_cleanup_then_restart(backend: Backend, tmp_path: Path) -> None:
    log_path = tmp_path / "kept.jsonl"
    _run_and_kill(_crash_archiver, backend, log_path, "a1", 30)
    _verify_after_crash(backend, log_path, "a1")
