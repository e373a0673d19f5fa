"""The HTTP service as a real `flowledger serve` process, called over real HTTP."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator

import pytest

from tests.support.service import Client, ServiceProcess, seed_lineage

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    repo = str(tmp_path_factory.mktemp("svc") / "repo")
    seed_lineage(repo)
    proc = ServiceProcess(repo)
    yield proc
    proc.stop()


@pytest.fixture
def api(server: ServiceProcess) -> Client:
    return server.client


def test_sql_events_and_lineage_over_http(api: Client) -> None:
    r = api.post("/sql", {"sql": "SELECT event_type, flowfile_uuid FROM provenance ORDER BY 1"})
    assert r.status == 200, r.body
    assert r.json()["columns"] == ["event_type", "flowfile_uuid"]
    assert sorted(map(tuple, r.json()["rows"])) == [
        ("DROP", "ff-2"),
        ("FORK", "ff-1"),
        ("RECEIVE", "ff-1"),
    ]
    events = api.get("/provenance/events?first=0&max=2").json()
    assert [e["eventId"] for e in events] == [0, 1]
    r = api.get("/nifi-api/provenance-events/2")
    assert r.status == 200 and r.json()["provenanceEvent"]["eventType"] == "DROP"
    r = api.get("/nifi-api/provenance-events/99")
    assert r.status == 404 and "99" in r.json()["detail"]
    r = api.get("/provenance/lineage/ff-2")
    assert r.status == 200 and any(n.get("eventType") == "FORK" for n in r.json()["nodes"])


def test_provenance_query_submit_poll_delete(api: Client) -> None:
    body = {
        "provenance": {
            "request": {
                "searchTerms": {"FlowFileUUID": {"value": "ff-1"}},
                "maxResults": 10,
            }
        }
    }
    r = api.post("/nifi-api/provenance", body)
    assert r.status == 201, r.body
    entity = r.json()["provenance"]
    assert entity["finished"] is True
    types = {e["eventType"] for e in entity["results"]["provenanceEvents"]}
    assert types == {"RECEIVE", "FORK"}
    polled = api.get(entity["uri"])
    assert polled.status == 200
    assert polled.json()["provenance"]["results"] == entity["results"]
    assert api.request("DELETE", entity["uri"]).status == 200
    gone = api.get(entity["uri"])
    assert gone.status == 404 and "deleted" in gone.json()["detail"]
    assert api.get("/nifi-api/provenance/not-a-query-id").status == 404
    # Size range and an inverted term
    body["provenance"]["request"] = {
        "searchTerms": {"EventType": {"value": "FORK", "inverse": True}},
        "minimumFileSize": 6,
    }
    found = api.post("/nifi-api/provenance", body).json()["provenance"]["results"]
    assert [e["eventType"] for e in found["provenanceEvents"]] == ["RECEIVE"]


def test_lineage_requests_and_expansion(api: Client) -> None:
    r = api.post("/nifi-api/provenance/lineage", {"lineage": {"request": {"uuid": "ff-2"}}})
    assert r.status == 201, r.body
    results = r.json()["lineage"]["results"]
    event_types = {n.get("eventType") for n in results["nodes"] if n["type"] == "EVENT"}
    assert {"FORK", "DROP"} <= event_types
    assert results["links"]
    fork_id = next(n["eventId"] for n in results["nodes"] if n.get("eventType") == "FORK")
    children = api.post(
        "/nifi-api/provenance/lineage",
        {"lineage": {"request": {"lineageRequestType": "CHILDREN", "eventId": fork_id}}},
    )
    assert children.status == 201, children.body
    uuids = {n["flowFileUuid"] for n in children.json()["lineage"]["results"]["nodes"]}
    assert "ff-2" in uuids
    lineage_uri = r.json()["lineage"]["uri"]
    assert api.get(lineage_uri).json()["lineage"]["results"] == results
    bad = api.post("/nifi-api/provenance/lineage", {"lineage": {"request": {}}})
    assert bad.status == 422 and "uuid or eventId" in bad.json()["detail"]


def test_content_download_replay_and_gone(api: Client) -> None:
    event = api.get("/nifi-api/provenance-events/0").json()["provenanceEvent"]
    assert event["outputContentAvailable"] is True and event["replayAvailable"] is True
    r = api.get("/nifi-api/provenance-events/0/content/output")
    assert r.status == 200 and r.body == b"a,b\n1,2\n"
    assert 'filename="a.csv"' in r.headers["content-disposition"]
    missing = api.get("/nifi-api/provenance-events/0/content/input")
    assert missing.status == 404 and "no input content" in missing.json()["detail"]
    replayed = api.post("/nifi-api/provenance-events/replays", {"eventId": 0})
    assert replayed.status == 201, replayed.body
    new = replayed.json()["provenanceEvent"]  # NiFi's ProvenanceEventEntity: the REPLAY event
    assert new["eventType"] == "REPLAY" and new["parentUuids"] == ["ff-1"]
    assert replayed.headers["location"] == f"/nifi-api/provenance-events/{new['eventId']}"
    refused = api.post("/nifi-api/provenance-events/replays", {"eventId": 1})
    assert refused.status == 409 and "Content Claim" in refused.json()["detail"]


def test_content_put_and_get(api: Client) -> None:
    r = api.post("/content", raw=b"x" * 1000, headers={"Content-Type": "application/octet-stream"})
    assert r.status == 201, r.body
    claim = r.json()["claim"]
    back = api.get("/content?" + urllib.parse.urlencode(claim))
    assert back.status == 200 and back.body == b"x" * 1000
    wrong = dict(claim, checksum="crc32:00000000")
    # Bytes that do not match the claim's checksum are an integrity failure (the repository
    # cannot tell a wrong claim from damaged bytes): 500 naming the object, never a bug's 500.
    r = api.get("/content?" + urllib.parse.urlencode(wrong))
    assert r.status == 500 and "corrupt" in r.json()["detail"], r.body


def test_ingest_json_lines_and_nifi_json(api: Client) -> None:
    lines = "\n".join(
        json.dumps(
            {
                "event_type": "CREATE",
                "flowfile_uuid": f"new-{i}",
                "component_id": "gen",
                "component_type": "GenerateFlowFile",
                "file_size": i,
            }
        )
        for i in range(3)
    )
    r = api.post("/provenance/events", raw=lines.encode())
    assert r.status == 201 and r.json()["events"] == 3
    nifi = [
        {
            "eventType": "CREATE",
            "entityId": "nifi-1",
            "componentId": "c",
            "componentType": "GenerateFlowFile",
            "entitySize": 3,
            "timestampMillis": 1_700_000_000_000,
            "componentName": "Generate orders",
            "processGroupId": "pg-1",
        }
    ]
    r = api.post("/provenance/events", nifi)
    assert r.status == 201 and r.json()["events"] == 1
    # NiFi's export names the component and its group: NiFi's event DTO carries them.
    event = api.get(f"/nifi-api/provenance-events/{r.json()['lastEventId']}").json()
    dto = event["provenanceEvent"]
    assert (dto["componentName"], dto["groupId"]) == ("Generate orders", "pg-1")
    assert dto["eventTime"] == "11/14/2023 22:13:20.000 UTC" and dto["fileSize"] == "3 bytes"
    bad = api.post("/provenance/events", raw=b'{"event_type": "SEND"}\n')
    assert bad.status == 400 and "line 1" in bad.json()["detail"]


def test_timeline_by_name_only(api: Client, server: ServiceProcess) -> None:
    assert api.get("/tables").status == 200
    r = api.get("/tables/nope/timeline")
    assert r.status == 404 and "nope" in r.json()["detail"]
    for name in ("..", "a..b", "%2e%2e", "x%2Fy", "s3:%2F%2Fb", "a%00b"):
        r = api.get(f"/tables/{name}/timeline")
        assert r.status in (403, 404), (name, r.status)
        assert r.status != 200


def test_health_needs_no_token_but_everything_else_does(server: ServiceProcess) -> None:
    anon = Client(server.host, server.port, token=None)
    assert anon.get("/health").status == 200
    for method, path in [
        ("GET", "/openapi.json"),
        ("POST", "/sql"),
        ("GET", "/nifi-api/provenance-events/0"),
        ("GET", "/tables"),
        ("POST", "/provenance/events"),
    ]:
        r = anon.request(method, path)
        assert r.status == 401, (path, r.status)
        assert r.headers.get("www-authenticate", "").startswith("Bearer")
    wrong = Client(server.host, server.port, token="x" * 26)
    assert wrong.get("/tables").status == 401
    basic = anon.get("/tables", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert basic.status == 401
    assert server.client.get("/openapi.json").json()["openapi"].startswith("3.")
    assert "test-token" not in server.log  # never logged


def test_sql_timestamptz_over_http_is_utc(api: Client) -> None:
    """`select now()` was a 500 (DuckDB needs pytz for TIMESTAMPTZ values)."""
    q = "SELECT now() IS NOT NULL, TIMESTAMPTZ '2023-11-14 22:13:20+00'"
    r = api.post("/sql", {"sql": q})
    assert r.status == 200, r.body
    row = r.json()["rows"][0]
    assert row[0] is True
    assert row[1].startswith("2023-11-14") and row[1].endswith("+00:00")
