"""50 concurrent clients query a real server while events are ingested: no errors."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.service import Answer, Client, ServiceProcess, seed_lineage

pytestmark = pytest.mark.unit

CLIENTS = 50
REQUESTS_PER_CLIENT = 6
BATCHES = 10


def _batch(i: int) -> bytes:
    return "\n".join(
        json.dumps(
            {
                "event_type": "CREATE",
                "flowfile_uuid": f"load-{i}-{j}",
                "component_id": "gen",
                "component_type": "GenerateFlowFile",
                "file_size": j,
            }
        )
        for j in range(50)
    ).encode()


def test_fifty_clients_query_while_events_are_ingested(tmp_path: Path) -> None:
    repo = str(tmp_path / "repo")
    seed_lineage(repo)
    # Queries queue behind 4 slots; the wait limit is raised from its 2 s default so that a
    # busy machine slows this test down instead of turning waits into 503s (the refusal
    # itself is tested with the SQL slots).
    env = {"FLOWLEDGER_SQL_CONCURRENCY": "4", "FLOWLEDGER_SQL_QUEUE_TIMEOUT_S": "60"}
    server = ServiceProcess(repo, env=env)
    api = server.client
    query = {"provenance": {"request": {"searchTerms": {"FlowFileUUID": {"value": "ff-1"}}}}}
    calls: list[Callable[[Client], Answer]] = [
        lambda c: c.get("/nifi-api/provenance-events/0"),
        lambda c: c.post("/nifi-api/provenance", query),
        lambda c: c.post(
            "/nifi-api/provenance/lineage", {"lineage": {"request": {"uuid": "ff-2"}}}
        ),
        lambda c: c.get("/provenance/events?first=0&max=20"),
        lambda c: c.get("/health", token=None),
        lambda c: c.post("/sql", {"sql": "SELECT count(*) FROM provenance"}),
    ]
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS + 1)

    def client(n: int) -> None:
        start.wait()
        for k in range(REQUESTS_PER_CLIENT):
            try:
                r = calls[(n + k) % len(calls)](api)
                ok = r.status in (200, 201)
                detail = r.body[:200].decode(errors="replace")
            except OSError as exc:
                ok, detail = False, repr(exc)
                r = Answer(0, {}, b"")
            with lock:
                statuses[r.status] += 1
                if not ok:
                    failures.append(f"client {n} call {k}: {r.status} {detail}")

    ingested: list[int] = []

    def ingest() -> None:
        start.wait()
        for i in range(BATCHES):
            r = api.post("/provenance/events", raw=_batch(i))
            if r.status != 201:
                failures.append(f"ingest {i}: {r.status} {r.body[:200]!r}")
            else:
                ingested.append(r.json()["events"])

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    threads.append(threading.Thread(target=ingest))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not any(t.is_alive() for t in threads)
        log = server.log
        assert failures == [], (failures[:10], log[log.find("ERROR") :][:6000])
        assert sum(statuses.values()) == CLIENTS * REQUESTS_PER_CLIENT
        assert sum(ingested) == BATCHES * 50
        r = api.post("/sql", {"sql": "SELECT count(*) FROM provenance WHERE component_id='gen'"})
        assert r.json()["rows"] == [[BATCHES * 50]]
        assert "Traceback" not in server.log
    finally:
        server.stop()
