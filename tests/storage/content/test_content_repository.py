"""The content repository against local FS, moto and MinIO, mirroring NiFi's
TestFileSystemRepository where NiFi has a test for the behaviour: claims, writes, reads,
counts, merge, sessions. Archive, expiry, backpressure and orphans: test_content_archive.py."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import ObjectStore, S3ObjectStore
from storage.content import (
    ClaimNotWritable,
    ContentClaim,
    ContentIntegrityError,
    ContentNotFound,
    ContentRepository,
    ContentRepositoryError,
    ResourceClaim,
)
from tests.support.backends import Backend
from tests.support.content import QUIET, MiB
from tests.support.content import object_key as _object_key
from tests.support.content import settings as _settings
from tests.support.content import write as _write


@pytest.fixture
def root(store: ObjectStore) -> ObjectStore:
    return store.scoped("content")


@pytest.fixture
def repo(root: ObjectStore) -> Iterator[ContentRepository]:
    r = ContentRepository(root, QUIET).initialize()
    yield r
    r.close()


# -- resource claim reuse (NiFi testResourceClaimReused*, testResourceClaimNotReusedAfterRestart)
def test_second_create_while_open_gets_another_claim_and_reuse_after_close(
    root: ObjectStore,
) -> None:
    repo = ContentRepository(root, QUIET).initialize()
    c1 = repo.create()
    out = repo.write(c1)
    out.write(b"first")
    c2 = repo.create()  # claim 1's stream is open: another resource claim
    assert c2.resource_claim != c1.resource_claim
    first = out.close()
    c3 = repo.create()  # closed and not full: claim 1 is offered again, after its bytes
    assert c3.resource_claim == c1.resource_claim and c3.offset == len(b"first")
    third = _write(repo, b"third", c3)
    second = _write(repo, b"second", c2)
    assert repo.read_bytes(first) == b"first"  # readable before the claim is sealed
    assert repo.read_bytes(third) == b"third" and repo.read_bytes(second) == b"second"
    repo.close()

    again = ContentRepository(
        root, QUIET
    ).initialize()  # a restart: old claims are never appended to
    c4 = again.create()
    assert c4.resource_claim not in {c1.resource_claim, c2.resource_claim}
    assert c4.resource_claim.identifier.split("-")[1] != c1.resource_claim.identifier.split("-")[1]
    assert again.read_bytes(first) == b"first" and again.read_bytes(third) == b"third"
    again.close()


def test_claim_is_sealed_at_max_appendable_size(root: ObjectStore) -> None:
    repo = ContentRepository(root, _settings(max_appendable_size=1000)).initialize()
    claims = [_write(repo, bytes([i]) * 300) for i in range(10)]
    by_rc: dict[ResourceClaim, int] = {}
    for c in claims:
        by_rc[c.resource_claim] = by_rc.get(c.resource_claim, 0) + 1
    assert sorted(by_rc.values()) == [2, 4, 4]  # 4 x 300 >= 1000 seals; the rest at commit
    assert repo.claim_state(claims[0]) == "pending"  # sealed, not yet committed
    repo.commit()
    assert {repo.claim_state(c) for c in claims} == {"active"}
    assert all(root.exists(_object_key(c)) for c in claims)
    assert [repo.read_bytes(c) for c in claims] == [bytes([i]) * 300 for i in range(10)]
    repo.close()


# -- remove (NiFi testRemoveWhileWritingToClaim, testRemoveDeletesFileIfNoClaimants) -----------
def test_remove_false_while_counted_or_stream_open_true_after_close(root: ObjectStore) -> None:
    # As in NiFi, the 2 MiB stay in the reserved resource claim (no move to a claim of its own).
    repo = ContentRepository(root, _settings(large_content_threshold=8 * MiB)).initialize()
    claim = repo.create()
    out = repo.write(claim)
    out.write(b"\0" * MiB)
    out.write(b"\0" * MiB)
    assert repo.remove(claim) is False  # claimant count is 1
    assert repo.decrement_claimant_count(claim) == 0
    assert repo.remove(claim) is False  # count 0, but the stream is open
    written = out.close()  # 2 MiB > max appendable size: sealed on close
    assert repo.remove(written) is True
    assert not root.exists(_object_key(written))
    assert not repo.is_accessible(written)
    with pytest.raises(ContentNotFound):
        repo.read_bytes(written)
    repo.close()


def test_read_from_archive_returns_bytes(repo: ContentRepository) -> None:
    claim = _write(repo, b"kept for replay")
    repo.commit()
    repo.decrement_claimant_count(claim)
    repo.commit()
    assert repo.claim_state(claim) == "archived"
    assert repo.is_accessible(claim)
    assert repo.read_bytes(claim) == b"kept for replay"
    assert repo.run_archive_cleanup() == 0  # within the 3 h retention


# -- read errors (NiFi testContentNotFoundExceptionThrownIfResourceClaimTooShort) -------------
def test_offset_past_end_is_content_not_found(repo: ContentRepository) -> None:
    claim = _write(repo, b"short")
    repo.commit()
    past = ContentClaim(claim.resource_claim, 1000, 10, claim.checksum)
    with pytest.raises(ContentNotFound, match="past the end"):
        repo.read_bytes(past)
    with pytest.raises(ContentNotFound):
        repo.read(past)
    assert not repo.is_accessible(past)
    missing = ContentClaim(ResourceClaim("default", "1", "0-nope-1"), 0, 3, claim.checksum)
    with pytest.raises(ContentNotFound, match="does not exist"):
        repo.read_bytes(missing)


def test_flipped_byte_and_truncation_are_integrity_errors(
    repo: ContentRepository, root: ObjectStore
) -> None:
    a = _write(repo, b"A" * 500)
    b = _write(repo, b"B" * 500)
    repo.commit()
    key = _object_key(b)
    data = bytearray(root.get(key))
    data[b.offset + 7] ^= 0x01
    root.put(key, bytes(data))
    assert repo.read_bytes(a) == b"A" * 500  # the other content of the claim is intact
    with pytest.raises(ContentIntegrityError, match=str(b.resource_claim)):
        repo.read_bytes(b)
    with pytest.raises(ContentIntegrityError):
        repo.read(b).read()
    root.put(key, bytes(data[: b.offset + 100]))
    with pytest.raises(ContentIntegrityError, match="truncated"):
        repo.read_bytes(b)


def test_large_content_streams_into_its_own_claim_and_is_verified(
    root: ObjectStore,
) -> None:
    repo = ContentRepository(
        root,
        _settings(large_content_threshold=MiB, verify_in_memory_max=MiB, read_part_size=MiB),
    ).initialize()
    small = _write(repo, b"small")
    big_data = os.urandom(6 * MiB + 3)
    big = repo.import_from(io.BytesIO(big_data))
    assert big.resource_claim != small.resource_claim and big.offset == 0
    assert big.length == len(big_data)
    repo.commit()
    with repo.read(big) as stream:
        assert stream.read() == big_data
    key = _object_key(big)
    data = bytearray(root.get(key))
    data[-1] ^= 0xFF
    root.put(key, bytes(data))
    with pytest.raises(ContentIntegrityError), repo.read(big) as stream:
        while stream.read(MiB):  # ranged GETs of 1 MiB, 4 in flight
            pass
    root.put(key, bytes(data[: 3 * MiB + 5]))
    with pytest.raises(ContentIntegrityError, match="truncated"), repo.read(big) as stream:
        while stream.read(MiB):
            pass
    root.delete(key)
    with pytest.raises(ContentNotFound):
        repo.read(big).read()
    repo.close()


# -- writes ------------------------------------------------------------------------------------
def test_write_with_no_content_and_size(repo: ContentRepository) -> None:
    empty = _write(repo, b"")
    assert empty.length == 0 and repo.size(empty) == 0 and repo.size(None) == 0
    full = _write(repo, b"12345")
    assert repo.size(full) == 5
    repo.commit()
    assert repo.read_bytes(empty) == b"" and repo.is_accessible(empty)
    with pytest.raises(ClaimNotWritable):
        repo.write(full)  # contents are immutable


def test_read_claim_then_write_then_read_more(repo: ContentRepository) -> None:
    first = _write(repo, b"one")
    assert repo.read_bytes(first) == b"one"
    second = _write(repo, b"two")
    assert second.resource_claim == first.resource_claim
    assert repo.read_bytes(first) == b"one" and repo.read_bytes(second) == b"two"


def test_aborted_write_leaves_nothing(repo: ContentRepository) -> None:
    keep = _write(repo, b"keep")
    with pytest.raises(RuntimeError), repo.write() as w:
        w.write(b"discard me")
        raise RuntimeError("processor failed")
    after = _write(repo, b"next")
    assert after.offset == keep.offset + 4  # the aborted bytes were dropped
    assert repo.get_claimant_count(keep) == 2


def test_increment_decrement_survive_restart(root: ObjectStore) -> None:
    repo = ContentRepository(root, QUIET).initialize()
    claim = _write(repo, b"counted")
    assert repo.get_claimant_count(claim) == 1
    assert repo.increment_claimant_count(claim) == 2
    assert repo.increment_claimant_count(claim) == 3
    assert repo.decrement_claimant_count(claim) == 2
    repo.commit()
    repo.close()
    again = ContentRepository(root, QUIET).initialize()
    assert again.get_claimant_count(claim) == 2
    assert again.checkpoint()
    again.decrement_claimant_count(claim)
    again.commit()
    again.close()
    third = ContentRepository(root, QUIET).initialize()  # checkpoint + one later batch
    assert third.get_claimant_count(claim) == 1
    assert third.decrement_claimant_count(claim) == 0
    assert third.decrement_claimant_count(claim) == 0  # never below zero
    third.close()


def test_uncommitted_counts_are_lost_on_restart(root: ObjectStore) -> None:
    repo = ContentRepository(root, QUIET).initialize()
    claim = _write(repo, b"x")
    repo.commit()
    repo.increment_claimant_count(claim)  # not committed: the process "dies"
    again = ContentRepository(root, QUIET).initialize()
    assert again.get_claimant_count(claim) == 1
    again.close()


def test_clone_shares_bytes(repo: ContentRepository, backend: Backend) -> None:
    original = _write(repo, b"shared")
    repo.commit()
    repo.store.stats.reset()
    copy = repo.clone(original)
    assert copy == original and repo.get_claimant_count(original) == 2
    assert repo.store.stats.total() == 0  # no bytes copied
    repo.decrement_claimant_count(original)
    repo.commit()
    assert repo.read_bytes(copy) == b"shared" and repo.claim_state(copy) == "active"


def test_merge_with_header_footer_demarcator(repo: ContentRepository) -> None:
    parts = [_write(repo, t) for t in (b"a", b"bb", b"ccc")]
    merged = repo.merge(parts, header=b"<", footer=b">", demarcator=b"|")
    assert repo.read_bytes(merged) == b"<a|bb|ccc>"
    plain = repo.merge(parts)
    assert repo.read_bytes(plain) == b"abbccc"
    repo.commit()
    assert repo.read_bytes(merged) == b"<a|bb|ccc>"


def test_large_merge_is_composed_server_side(root: ObjectStore) -> None:
    repo = ContentRepository(root, _settings(large_content_threshold=MiB)).initialize()
    # Big enough that each part still has >= 5 MiB to copy after the planner tops up the
    # previous (small) piece to the 5 MiB part minimum.
    x, y = os.urandom(11 * MiB + 1), os.urandom(11 * MiB + 2)
    cx, cy = repo.import_from(x), repo.import_from(y)
    small = _write(repo, b"tail")
    repo.commit()
    root.stats.reset()
    merged = repo.merge([cx, cy, small], header=b"H", footer=b"F", demarcator=b"--")
    stats = root.stats.snapshot()
    repo.commit()
    assert merged.offset == 0 and merged.length == 1 + len(x) + 2 + len(y) + 2 + 4 + 1
    assert repo.read_bytes(merged) == b"H" + x + b"--" + y + b"--tail" + b"F"
    if isinstance(root, S3ObjectStore):
        assert stats.get("MPU_COPY", 0) >= 2, stats  # the large parts never left the server
    assert repo.get_claimant_count(merged) == 1


def test_import_and_export_paths_and_streams(repo: ContentRepository, tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    payload = os.urandom(10_000)
    src.write_bytes(payload)
    from_path = repo.import_from(src)
    from_stream = repo.import_from(io.BytesIO(payload))
    repo.commit()
    out = tmp_path / "out.bin"
    assert repo.export_to(from_path, out) == 10_000 and out.read_bytes() == payload
    assert repo.export_to(from_stream, out, append=True, offset=100, length=50) == 50
    assert out.read_bytes() == payload + payload[100:150]
    buf = io.BytesIO()
    assert repo.export_to(from_stream, buf, offset=9_990) == 10
    assert buf.getvalue() == payload[9_990:]
    with pytest.raises(ContentNotFound):
        repo.export_to(from_path, io.BytesIO(), offset=10_001)


def test_sessions_commit_and_rollback_independently(
    repo: ContentRepository, root: ObjectStore
) -> None:
    with repo.transaction() as s1:
        kept = s1.write_bytes(b"kept")
    s2 = repo.session()
    dropped = s2.write_bytes(b"x" * (2 * MiB))  # sealed on close (over max appendable size)
    assert root.exists(_object_key(dropped))
    s2.rollback()
    assert not root.exists(_object_key(dropped))
    assert repo.claim_state(dropped) == "unknown"
    assert repo.read_bytes(kept) == b"kept" and repo.get_claimant_count(kept) == 1


def test_purge(repo: ContentRepository, root: ObjectStore) -> None:
    claim = _write(repo, b"gone")
    repo.commit()
    repo.purge()
    assert list(root.list()) == []
    assert repo.get_claimant_count(claim) == 0 and not repo.is_accessible(claim)
    fresh = _write(repo, b"new life")
    repo.commit()
    assert repo.read_bytes(fresh) == b"new life"


def test_constructing_does_no_io_initialize_reads_the_ledger(root: ObjectStore) -> None:
    first = ContentRepository(root, QUIET).initialize()
    kept = _write(first, b"kept")
    first.close()
    requests, threads = root.stats.total(), set(threading.enumerate())
    repo = ContentRepository(root, _settings(archive_cleanup_frequency=3600))
    assert root.stats.total() == requests  # no ledger read, no orphan sweep
    assert set(threading.enumerate()) <= threads  # no archive-cleanup thread yet
    with pytest.raises(ContentRepositoryError, match="not initialized"):
        repo.get_claimant_count(kept)  # counts are unknown until the ledger is read
    assert repo.initialize() is repo
    assert root.stats.total() > requests
    assert set(threading.enumerate()) - threads  # the archive-cleanup thread
    assert repo.get_claimant_count(kept) == 1 and repo.read_bytes(kept) == b"kept"
    repo.close()
