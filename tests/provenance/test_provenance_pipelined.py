"""Pipelined durable registration: each call returns a future at once, resolved with the ids
the synchronous call would have returned, once the batch is durable. (Its crash safety is in
test_provenance_journal_log.py: SIGKILL at every step, acknowledged = future resolved.)"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

from provenance import (
    InvalidEvent,
    PipelineClosed,
    PipelinedRegistration,
    ProvenanceRepository,
    ProvenanceSettings,
    Query,
    SearchTerm,
)
from storage import open_store
from tests.support.provenance_events import ev

pytestmark = pytest.mark.unit


def _repo(tmp_path: Path) -> ProvenanceRepository:
    settings = ProvenanceSettings(cache_dir=str(tmp_path / "cache"))
    return ProvenanceRepository.open(open_store(str(tmp_path / "repo")), settings)


def test_futures_resolve_with_the_ids_in_registration_order_and_events_are_searchable(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    with repo.pipelined(depth=2) as pipe:
        futures = [pipe.register_events([ev(i) for i in range(n, n + 7)]) for n in (0, 7, 14)]
        table = repo.query_table(Query((SearchTerm("flowfile_uuid", ev(0).flowfile_uuid),)))
        futures.append(pipe.register_table(table.slice(0, 0)))  # an empty batch: no ids
    ids = [f.result() for f in futures]
    flat = [i for batch in ids for i in batch]
    assert flat == list(range(flat[0], flat[0] + 21))  # consecutive, in call order
    assert ids[-1] == []
    for i in (0, 13, 20):
        [found] = repo.query(Query((SearchTerm("flowfile_uuid", ev(i).flowfile_uuid),)))
        assert found.event_id == flat[i]
    repo.close()


def test_a_malformed_event_is_refused_by_the_call_and_nothing_is_queued(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = repo.max_event_id()
    with repo.pipelined() as pipe:
        with pytest.raises(InvalidEvent):
            pipe.register_events([ev(0), {"event_type": "NOT_A_TYPE"}])
        pipe.wait()
    assert repo.max_event_id() == before
    repo.close()


def test_a_failed_batch_fails_its_future_and_refuses_later_batches() -> None:
    written: list[int] = []
    gate = threading.Event()

    def append(table: pa.Table) -> list[int]:
        gate.wait(5)
        if table.num_rows == 2:
            raise OSError("store unreachable")
        written.append(table.num_rows)
        return list(range(table.num_rows))

    pipe = PipelinedRegistration(append, lambda evs: pa.table({"x": list(evs)}), lambda t: t)
    first = pipe.register_table(pa.table({"x": [1]}))
    failing = pipe.register_table(pa.table({"x": [1, 2]}))
    gate.set()
    assert first.result(5) == [0]
    with pytest.raises(OSError, match="unreachable"):
        failing.result(5)
    with pytest.raises(PipelineClosed, match="register them again"):
        pipe.register_table(pa.table({"x": [1, 2, 3]}))
    with pytest.raises(OSError):
        pipe.close()
    assert written == [1]  # nothing after the failed batch was written
    with pytest.raises(PipelineClosed):
        pipe.register_table(pa.table({"x": [1]}))


def test_a_closed_pipeline_refuses_batches(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    pipe = repo.pipelined()
    pipe.close()
    with pytest.raises(PipelineClosed, match="closed"):
        pipe.register_events([ev(0)])
    repo.close()


def test_depth_bounds_the_batches_in_flight() -> None:
    release = threading.Event()
    in_flight: list[int] = []

    def append(table: pa.Table) -> list[int]:
        release.wait(5)
        return [0]

    pipe = PipelinedRegistration(append, lambda evs: pa.table({"x": list(evs)}), lambda t: t, 2)
    pipe.register_table(pa.table({"x": [1]}))
    pipe.register_table(pa.table({"x": [1]}))
    third = threading.Thread(
        target=lambda: in_flight.append(len(pipe.register_table(pa.table({"x": [1]})).result(5)))
    )
    third.start()
    third.join(0.3)
    assert third.is_alive()  # the third call waits for a slot
    release.set()
    third.join(5)
    assert in_flight == [1]
    pipe.close()
