"""`flowledger serve --workers N`: several processes on one port, each a stateless replica,
answering the same lookups; events ingested through one are found through any."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.service import ServiceProcess, seed_lineage

pytestmark = pytest.mark.unit


def test_two_workers_answer_the_same(tmp_path: Path) -> None:
    repo = str(tmp_path / "repo")
    seed_lineage(repo)
    proc = ServiceProcess(repo, {"XDG_STATE_HOME": str(tmp_path / "state")}, ("--workers", "2"))
    try:
        api = proc.client
        answers = {api.get("/nifi-api/provenance-events/2").body for _ in range(20)}
        assert len(answers) == 1
        assert json.loads(answers.pop())["provenanceEvent"]["eventType"] == "DROP"
        r = api.get("/nifi-api/provenance-events/1", token="wrong-token-0123456789")
        assert r.status == 401  # every worker has the one token
        line = json.dumps(
            {
                "event_type": "CREATE",
                "flowfile_uuid": "w-1",
                "component_id": "g",
                "component_type": "T",
                "file_size": 1,
            }
        )
        added = api.post("/provenance/events", raw=line.encode())
        assert added.status == 201, added.body
        new_id = added.json()["lastEventId"]
        # Whichever worker answers, the new event is there (a miss asks the store again).
        for _ in range(10):
            r = api.get(f"/nifi-api/provenance-events/{new_id}")
            assert r.status == 200 and r.json()["provenanceEvent"]["componentId"] == "g"
    finally:
        proc.stop()
    assert proc.proc.returncode is not None


@pytest.mark.parametrize("workers", ["0", "-1"])
def test_workers_must_be_positive(tmp_path: Path, workers: str) -> None:
    with pytest.raises(RuntimeError, match="--workers must be at least 1"):
        ServiceProcess(str(tmp_path / "repo"), {}, ("--workers", workers))
