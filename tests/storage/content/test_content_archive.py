"""The content repository's archive (NiFi TestFileSystemRepository where NiFi has a test):
archived claims, expiry by age and usage, backpressure, the orphan sweep, interrupted
destruction. Claims, writes and reads: test_content_repository.py."""

from __future__ import annotations

import logging

import pytest

from storage import ObjectStore
from storage.content import ContainerFull, ContentNotFound, ContentRepository
from tests.support.backends import Backend
from tests.support.content import QUIET
from tests.support.content import object_key as _object_key
from tests.support.content import settings as _settings
from tests.support.content import write as _write


@pytest.fixture
def root(store: ObjectStore) -> ObjectStore:
    return store.scoped("content")


# -- archive (NiFi testClaimsArchivedWhenMarkedDestructable, testMarkDestructableDoesNot...) --
def test_archived_once_destructable_never_while_writable(root: ObjectStore) -> None:
    repo = ContentRepository(root, _settings(archive_max_retention=0)).initialize()
    claim = repo.create()
    out = repo.write(claim)
    out.write(b"payload")
    repo.decrement_claimant_count(claim)
    assert repo.claim_state(claim) == "writable"
    assert repo.run_archive_cleanup() == 0  # a writable claim is never archived or destroyed
    written = out.close()
    assert repo.claim_state(written) == "writable"  # not full: still offered for appends
    assert repo.run_archive_cleanup() == 0
    repo.commit()  # sealed; its count is durably 0 -> archived
    assert repo.claim_state(written) == "archived"
    assert repo.read_bytes(written) == b"payload"  # archive = a state, the bytes are in place
    assert repo.run_archive_cleanup() == 1  # retention 0: destroyed at the next cleanup
    assert repo.claim_state(written) == "destroyed"
    assert not root.exists(_object_key(written))
    repo.close()


def test_archived_claims_removed_by_age(root: ObjectStore) -> None:
    repo = ContentRepository(root, _settings(archive_max_retention=3600)).initialize()
    old = _write(repo, b"old")
    keep = _write(repo, b"keep")
    repo.commit()
    repo.decrement_claimant_count(old)  # old and keep share a resource claim: count 2 -> 1
    assert repo.get_claimant_count(old) == 1
    repo.decrement_claimant_count(keep)
    repo.commit()
    assert repo.claim_state(old) == "archived"
    assert repo.run_archive_cleanup() == 0  # younger than the retention
    repo.close()
    aged = ContentRepository(root, _settings(archive_max_retention=0)).initialize()  # time passes
    assert aged.claim_state(old) == "archived"
    assert aged.run_archive_cleanup() == 1
    assert aged.claim_state(old) == "destroyed" and not aged.is_accessible(old)
    with pytest.raises(ContentNotFound, match="destroyed"):
        aged.read_bytes(old)
    aged.close()


def test_archived_claims_removed_by_usage_oldest_first(root: ObjectStore) -> None:
    s = _settings(
        max_bytes=10_000,
        max_appendable_size=1000,
        archive_max_usage_percentage=50,
        archive_backpressure_percentage=100,
    )
    repo = ContentRepository(root, s).initialize()
    claims = []
    for i in range(8):  # 8 resource claims of 1,000 bytes = 80 % of max_bytes
        claims.append(_write(repo, bytes([i]) * 1000))
        repo.commit()
    assert len({c.resource_claim for c in claims}) == 8
    assert repo.get_container_usage("default") == 8000
    assert repo.get_container_usable_space("default") == 2000
    for c in claims[:6]:  # unreference the six oldest, one commit each (ordered archive times)
        repo.decrement_claimant_count(c)
        repo.commit()
    assert repo.run_archive_cleanup() == 3  # 8,000 -> 5,000 (50 %): the three oldest go
    states = [repo.claim_state(c) for c in claims]
    assert states == ["destroyed"] * 3 + ["archived"] * 3 + ["active"] * 2
    assert repo.get_container_usage("default") == 5000
    repo.close()


def test_backpressure_waits_with_log_then_container_full(
    root: ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    s = _settings(
        max_bytes=4000,
        max_appendable_size=1000,
        archive_max_usage_percentage=50,
        archive_backpressure_percentage=75,
        backpressure_max_wait=0.5,
    )
    repo = ContentRepository(root, s).initialize()
    claims = [_write(repo, b"x" * 1000) for _ in range(3)]  # sealed at 1,000 bytes each
    repo.commit()
    with caplog.at_level(logging.WARNING, logger="storage.content"), pytest.raises(ContainerFull):
        _write(repo, b"blocked")  # 75 % used, nothing archived to free: writers wait, then fail
    assert "backpressure" in caplog.text and "waiting for archive cleanup" in caplog.text
    repo.decrement_claimant_count(claims[0])
    repo.decrement_claimant_count(claims[1])
    repo.commit()
    late = _write(repo, b"relieved")  # the wait runs archive cleanup: usage drops to 25 %
    repo.commit()
    assert repo.read_bytes(late) == b"relieved"
    assert repo.claim_state(claims[0]) == "destroyed"
    repo.close()


def test_round_robin_skips_containers_under_backpressure(
    backend: Backend, root: ObjectStore
) -> None:
    a, b = backend.open().scoped("ca"), backend.open().scoped("cb")
    s = _settings(
        max_bytes=2500,
        max_appendable_size=1000,
        archive_max_usage_percentage=50,
        archive_backpressure_percentage=70,
        backpressure_max_wait=0.3,
    )
    repo = ContentRepository(root, s, containers=[("a", a), ("b", b)]).initialize()
    assert repo.get_container_names() == ["a", "b"]
    assert repo.get_container_capacity("a") == 2500
    c1 = _write(repo, b"1" * 2000)  # a: 80 %, over the limit
    c2 = _write(repo, b"2" * 1000)  # b: 40 %
    c3 = _write(repo, b"3" * 1000)  # a's turn, but a is full: b (80 %)
    assert [c.resource_claim.container for c in (c1, c2, c3)] == ["a", "b", "b"]
    repo.commit()
    with pytest.raises(ContainerFull):
        _write(repo, b"4")
    repo.decrement_claimant_count(c2)
    repo.commit()
    c5 = _write(repo, b"5")  # the wait destroys b's archive (over 50 %): b has room again
    assert c5.resource_claim.container == "b"
    assert repo.claim_state(c2) == "destroyed"
    repo.commit()
    assert [repo.read_bytes(c) for c in (c1, c3, c5)] == [b"1" * 2000, b"3" * 1000, b"5"]
    assert a.exists(c1.resource_claim.key) and b.exists(c5.resource_claim.key)
    repo.close()


# -- cleanup (NiFi testUnreferencedFilesAreArchivedOnCleanup) ---------------------------------
def test_cleanup_archives_objects_nobody_references(root: ObjectStore) -> None:
    crashed = ContentRepository(root, QUIET).initialize()
    lost = _write(crashed, b"never committed" * 100)
    crashed._default._seal_all(list(crashed._default._claims))  # sealed, then "crash"
    assert root.exists(_object_key(lost))
    kept = ContentRepository(root, _settings(orphan_grace_period=3600)).initialize()
    assert kept.cleanup() == 0  # too young: its writer may still commit it
    kept.close()
    repo = ContentRepository(
        root, _settings(orphan_grace_period=0, cleanup_on_start=False)
    ).initialize()
    assert repo.claim_state(lost) == "unknown"
    assert repo.cleanup() == 1
    assert repo.claim_state(lost) == "archived"
    assert repo.read_bytes(lost) == b"never committed" * 100  # archived, still readable
    repo.close()
    expire = ContentRepository(
        root, _settings(archive_max_retention=0, orphan_grace_period=0)
    ).initialize()
    assert expire.run_archive_cleanup() == 1
    assert list(root.list("containers/")) == []
    expire.close()


def test_crash_between_destroy_plan_and_delete_is_finished_on_start(
    root: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage.content import cleanup

    repo = ContentRepository(root, _settings(archive_max_retention=0)).initialize()
    doomed = _write(repo, b"doomed")
    repo.commit()
    repo.decrement_claimant_count(doomed)
    repo.commit()

    def killed(*args: object) -> None:
        raise KeyboardInterrupt("killed after the destroy batch, before the DELETE")

    monkeypatch.setattr(cleanup, "_delete", killed)
    with pytest.raises(KeyboardInterrupt):
        repo.run_archive_cleanup()
    monkeypatch.undo()
    assert root.exists(_object_key(doomed))  # planned (in the ledger) but not carried out
    again = ContentRepository(root, QUIET).initialize()  # cleanup on start finishes the destruction
    assert again.claim_state(doomed) == "destroyed"
    assert not root.exists(_object_key(doomed))
    again.close()
