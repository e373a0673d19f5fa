"""A staged ingest's cleanup deletes its parts only while no manifest can name them: a failed
call after the manifest may have landed never leads to a deletion (docs/faults.md). Faults are
injected into the local store's calls for the manifest key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provenance import ProvenanceError, ProvenanceRepository, ProvenanceUnknownOutcome
from provenance.records import to_table
from provenance.staging import MANIFEST_SUFFIX, STAGING
from storage import (
    EndpointUnreachable,
    ObjectStore,
    UnknownOutcome,
    UnknownOutcomeError,
    open_store,
)
from tests.support.provenance_events import ev, settings

pytestmark = pytest.mark.unit


def _ingest(repo: ProvenanceRepository, first: int, n: int) -> None:
    events = [ev(i) for i in range(first, first + n)]
    repo.register_staged([to_table(events, 1024)])


def _on_manifest(store: ObjectStore, name: str, fault: Callable[..., Any]) -> None:
    """Replace `store.<name>` by `fault(real, key, *args)` for manifest keys."""
    real = getattr(store, name)

    def call(key: str, *args: Any, **kwargs: Any) -> Any:
        if key.endswith(MANIFEST_SUFFIX):
            return fault(real, key, *args, **kwargs)
        return real(key, *args, **kwargs)

    setattr(store, name, call)


def _parts(store: ObjectStore) -> int:
    return len(list(store.list(STAGING)))


def _count(root: Path, tmp_path: Path) -> tuple[int, int]:
    repo = ProvenanceRepository.open(open_store(str(root)), settings(tmp_path / "fresh"))
    _, rows = repo.sql("SELECT count(*), count(DISTINCT event_id) FROM provenance")
    repo.close()
    return rows[0]


def _unreachable(*args: Any, **kwargs: Any) -> Any:
    raise EndpointUnreachable("get: cannot reach S3 endpoint", "x")


def test_a_failed_read_of_an_acknowledged_manifest_keeps_the_ingest(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    store = open_store(str(root))
    repo = ProvenanceRepository.open(store, settings(tmp_path), background=False)
    _ingest(repo, 0, 10)
    _on_manifest(repo.store, "get", _unreachable)  # every read of a manifest fails now
    _ingest(repo, 10, 30)  # acknowledged: it is committed, whatever a read does after
    assert _parts(repo.store) == 2
    assert _count(root, tmp_path) == (40, 40)


def test_an_unknown_manifest_put_keeps_the_parts_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    store = open_store(str(root))
    repo = ProvenanceRepository.open(store, settings(tmp_path), background=False)

    def landed_unanswered(real: Any, key: str, data: bytes) -> Any:
        real(key, data)
        raise UnknownOutcome(f"put-if-absent {key}: may or may not have been applied", key)

    _on_manifest(repo.store, "put_if_absent", landed_unanswered)
    _on_manifest(repo.store, "get", _unreachable)
    with pytest.raises(ProvenanceUnknownOutcome, match="provenance events --first 0"):
        _ingest(repo, 0, 25)
    assert _parts(repo.store) == 1  # it landed: its part must stay
    assert _count(root, tmp_path) == (25, 25)


def test_a_manifest_put_that_was_never_sent_deletes_the_parts(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "repo"))
    repo = ProvenanceRepository.open(store, settings(tmp_path), background=False)
    _on_manifest(repo.store, "put_if_absent", _unreachable)
    with pytest.raises(EndpointUnreachable):
        _ingest(repo, 0, 25)
    assert _parts(repo.store) == 0


def test_an_unknown_id_allocation_is_a_plain_failure_that_deletes_the_parts(
    tmp_path: Path,
) -> None:
    """Ids may be taken, but no manifest was sent: the ingest is known not to have committed
    (exit 1, not 3), and its parts can go."""
    store = open_store(str(tmp_path / "repo"))
    repo = ProvenanceRepository.open(store, settings(tmp_path), background=False)

    def unknown(count: int) -> int:
        raise ProvenanceUnknownOutcome("allocating ids: may or may not have been applied")

    repo.ids.allocate = unknown  # type: ignore[method-assign]
    with pytest.raises(ProvenanceError, match="did not commit") as err:
        _ingest(repo, 0, 25)
    assert not isinstance(err.value, UnknownOutcomeError)
    assert _parts(repo.store) == 0
