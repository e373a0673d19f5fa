"""The HTTP service, served by uvicorn on a free port and called over real HTTP."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from flowledger.service import create_app
from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from tests.support.servers import free_port

pytestmark = pytest.mark.unit


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = resp.read()
            kind = resp.headers.get("content-type", "")
            return resp.status, json.loads(body) if "json" in kind else body.decode()
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    repo = str(tmp_path / "repo")
    with ProvenanceRepository(open_store(repo)) as prov:
        prov.register_events(
            [
                ProvenanceEvent("RECEIVE", "ff-1", "in", "GetFile", 10, transit_uri="file:///a"),
                ProvenanceEvent("FORK", "ff-1", "split", "SplitText", 10, child_uuids=("ff-2",)),
                ProvenanceEvent("DROP", "ff-2", "out", "Drop", 5),
            ],
            sync=True,
        )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(repo), host="127.0.0.1", port=port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if _get(base + "/health")[0] == 200:
                break
        except OSError:
            time.sleep(0.05)
    yield base
    server.should_exit = True
    thread.join(timeout=30)


def test_sql_events_and_lineage_over_http(service: str) -> None:
    q = urllib.parse.quote("SELECT event_type, flowfile_uuid FROM provenance ORDER BY event_id")
    status, body = _get(f"{service}/provenance/sql?q={q}")
    assert status == 200
    assert body["columns"] == ["event_type", "flowfile_uuid"]
    assert body["rows"] == [["RECEIVE", "ff-1"], ["FORK", "ff-1"], ["DROP", "ff-2"]]
    status, events = _get(f"{service}/provenance/events?first=0&max=2")
    assert status == 200 and [e["event_id"] for e in events] == [0, 1]
    status, event = _get(f"{service}/provenance/events/2")
    assert status == 200 and event["event_type"] == "DROP"
    assert _get(f"{service}/provenance/events/99")[0] == 404
    status, graph = _get(f"{service}/provenance/lineage/ff-2")
    assert status == 200 and graph["nodes"]


def test_sql_through_the_service_is_read_only(service: str) -> None:
    for statement in [
        "DROP VIEW provenance",
        "CREATE TABLE x AS SELECT 1",
        "COPY provenance TO 'x'",
    ]:
        status, body = _get(f"{service}/provenance/sql?q={urllib.parse.quote(statement)}")
        assert status == 400, (statement, body)
    status, body = _get(
        f"{service}/provenance/sql?q={urllib.parse.quote('SELECT count(*) FROM provenance')}"
    )
    assert status == 200 and body["rows"] == [[3]]


def test_sql_timestamptz_over_http_is_utc(service: str) -> None:
    """`select now()` was a 500 (DuckDB needs pytz for TIMESTAMPTZ values)."""
    q = urllib.parse.quote("SELECT now() IS NOT NULL, TIMESTAMPTZ '2023-11-14 22:13:20+00'")
    status, body = _get(f"{service}/provenance/sql?q={q}")
    assert status == 200, body
    assert body["rows"][0][0] is True
    assert body["rows"][0][1].startswith("2023-11-14") and body["rows"][0][1].endswith("+00:00")
