"""`flowledger provenance ingest --format openlineage`: RunEvents become NiFi provenance."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.generated.output_statistics_output_dataset import (
    OutputStatisticsOutputDatasetFacet,
)
from openlineage.client.serde import Serde
from typer.testing import CliRunner

from flowledger.cli import app
from provenance import ProvenanceRepository
from provenance.ancestry import input_files
from provenance.openlineage import dataset_uri
from storage import StoreSettings, open_store

pytestmark = pytest.mark.unit
RUN = str(uuid.uuid4())


def _event(state: RunState, time: str, inputs: int = 2) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime=time,
        producer="https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark",
        run=Run(runId=RUN),
        job=Job(namespace="spark", name="etl.write_orders"),
        inputs=[InputDataset(namespace="s3://raw", name=f"orders/{i}.csv") for i in range(inputs)],
        outputs=[
            OutputDataset(
                namespace="file",
                name="/warehouse/orders",
                outputFacets={
                    "outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=7, size=512)
                },
            )
        ],
    )


def _file(tmp_path: Path, *events: RunEvent) -> Path:
    path = tmp_path / "openlineage.json"
    path.write_text("".join(Serde.to_json(e) + "\n" for e in events))
    return path


def _ingest(repo: str, path: Path) -> dict[str, int]:
    result = CliRunner().invoke(
        app,
        ["provenance", "ingest", "--format", "openlineage", str(path), "--repo", repo, "--json"],
    )
    assert result.exit_code == 0, result.output
    out: dict[str, int] = json.loads(result.output)
    return out


def test_complete_run_events_become_receive_join_fork_send(tmp_path: Path) -> None:
    repo = "file://" + str(tmp_path / "repo")
    path = _file(
        tmp_path,
        _event(RunState.START, "2026-11-23T10:00:00.000Z"),
        _event(RunState.RUNNING, "2026-11-23T10:00:01.000Z"),
        _event(RunState.COMPLETE, "2026-11-23T10:00:02.500Z"),
    )
    first = _ingest(repo, path)
    assert first == {
        "run_events": 3,
        "runs": 1,
        "skipped": 2,
        "events": 2 + 1 + 1 + 1,
        "recorded": 1,
        "already_recorded": 0,
    }
    assert _ingest(repo, path)["events"] == 0  # same run id and event time: nothing new
    with ProvenanceRepository.open(open_store(repo, StoreSettings(fsync=False))) as prov:
        events = prov.get_events(0, 100)
        assert [e.event_type for e in events] == ["RECEIVE", "RECEIVE", "JOIN", "FORK", "SEND"]
        assert {e.component_id for e in events} == {RUN}
        when = datetime(2026, 11, 23, 10, 0, 2, 500_000, tzinfo=UTC)
        assert {e.event_time for e in events} == {int(when.timestamp() * 1000)}
        send = events[-1]
        assert (send.transit_uri, send.file_size) == ("file:///warehouse/orders", 512)
        assert send.updated_attributes["record.count"] == "7"
        assert events[2].updated_attributes["openlineage.job.name"] == "etl.write_orders"
        assert input_files(prov, send.flowfile_uuid) == [
            "s3://raw/orders/0.csv",
            "s3://raw/orders/1.csv",
        ]


def test_failed_runs_leave_no_send_and_bad_input_writes_nothing(tmp_path: Path) -> None:
    repo = "file://" + str(tmp_path / "repo")
    fail = json.loads(Serde.to_json(_event(RunState.FAIL, "2026-11-23T09:00:00Z")))
    fail["run"]["facets"] = {
        "errorMessage": {
            "message": "AnalysisException: no such table",
            "programmingLanguage": "JAVA",
        }
    }
    path = tmp_path / "fail.json"
    path.write_text(json.dumps(fail) + "\n")
    failed = _ingest(repo, path)
    assert failed == {
        "run_events": 1,
        "runs": 1,
        "skipped": 0,
        "events": 2 + 1 + 1,
        "recorded": 1,
        "already_recorded": 0,
    }
    with ProvenanceRepository.open(open_store(repo, StoreSettings(fsync=False))) as prov:
        events = prov.get_events(0, 10)
    # What it read, and the failure; no FORK, no SEND.
    assert [e.event_type for e in events] == ["RECEIVE", "RECEIVE", "JOIN", "DROP"]
    assert events[-1].details is not None and "no such table" in events[-1].details
    assert events[-1].updated_attributes["openlineage.run.state"] == "FAIL"
    assert _ingest(repo, path)["already_recorded"] == 1
    good = Serde.to_json(_event(RunState.COMPLETE, "2026-11-23T10:00:00Z"))
    bad = json.loads(good)
    bad["run"]["runId"] = "not-a-uuid"
    path = tmp_path / "bad.json"
    path.write_text(good + "\n" + json.dumps(bad) + "\n")
    result = CliRunner().invoke(
        app, ["provenance", "ingest", "--format", "openlineage", str(path), "--repo", repo]
    )
    assert result.exit_code != 0
    assert "line 2" in str(result.exception) + result.output
    with ProvenanceRepository.open(open_store(repo, StoreSettings(fsync=False))) as prov:
        assert prov.max_event_id() == 3  # the good line before it was not written either


def test_dataset_uris_follow_openlineage_naming() -> None:
    assert dataset_uri("file", "/tmp/in.csv") == "file:///tmp/in.csv"
    assert dataset_uri("s3://bucket", "dir/x") == "s3://bucket/dir/x"
    assert dataset_uri("postgres://db:5432", "shop.public.orders") == (
        "postgres://db:5432/shop.public.orders"
    )


def test_marquez_compatible_endpoint_records_posted_run_events(tmp_path: Path) -> None:
    """`POST /api/v1/lineage` on a real `flowledger serve` process, with its bearer token."""
    from tests.support.service import ServiceProcess

    repo = str(tmp_path / "repo")
    server = ServiceProcess(repo)
    try:
        api = server.client

        def post(event: RunEvent | dict[str, Any]) -> tuple[int, Any]:
            body = json.loads(Serde.to_json(event)) if isinstance(event, RunEvent) else event
            r = api.post("/api/v1/lineage", body)
            return r.status, r.json()

        assert post(_event(RunState.START, "2026-11-23T10:00:00Z"))[1]["events"] == 0
        complete = _event(RunState.COMPLETE, "2026-11-23T10:00:02Z", inputs=1)
        status, result = post(complete)
        assert (status, result["runs"], result["events"]) == (201, 1, 4)
        assert post(complete)[1]["events"] == 0
        status, error = post({"run": {"runId": RUN}, "eventType": "COMPLETE"})
        assert status == 400 and "missing field" in error["detail"]
    finally:
        server.stop()
    with ProvenanceRepository.open(open_store(repo)) as prov:
        assert [e.event_type for e in prov.get_events(0, 10)] == [
            "RECEIVE", "CONTENT_MODIFIED", "FORK", "SEND",
        ]  # fmt: skip


def test_openlineage_client_good_and_malformed_events_over_http(tmp_path: Path) -> None:
    """The real `openlineage-python` client's HTTP transport against `flowledger serve`: good
    events are stored and say so, a repeat says nothing new was stored, and malformed events
    (wrong shapes, missing run) are one 4xx naming the field, never a 500, storing nothing."""
    import requests
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

    from tests.support.service import TOKEN, ServiceProcess

    server = ServiceProcess(str(tmp_path / "repo"))
    try:
        base = f"http://{server.host}:{server.port}"
        transport = HttpTransport(HttpConfig(url=base, auth=ApiKeyTokenProvider({"apiKey": TOKEN})))
        client = OpenLineageClient(transport=transport)
        client.emit(_event(RunState.START, "2026-11-23T10:00:00Z"))  # accepted: 2xx
        complete = _event(RunState.COMPLETE, "2026-11-23T10:00:02Z", inputs=1)
        first = transport.emit(complete)
        assert first.status_code == 201
        assert first.json()["stored"] is True and first.json()["recorded"] == 1
        again = transport.emit(complete)
        assert again.status_code == 200
        body = again.json()
        assert (body["stored"], body["events"], body["recorded"], body["already_recorded"]) == (
            False, 0, 0, 1,
        )  # fmt: skip
        assert "nothing new stored" in body["detail"]
        started = transport.emit(_event(RunState.START, "2026-11-23T11:00:00Z"))
        assert started.status_code == 200 and "nothing stored" in started.json()["detail"]

        good = json.loads(Serde.to_json(_event(RunState.COMPLETE, "2026-11-23T12:00:00Z")))
        malformed: list[tuple[dict[str, Any], str]] = [
            ({**good, "inputs": "s3://raw/orders/0.csv"}, "inputs must be an array"),
            ({**good, "run": "not-an-object"}, "run must be an object"),
            ({**good, "outputs": [1]}, "outputs[0] must be a dataset object"),
            ({**good, "outputs": [{"namespace": "file"}]}, "outputs[0].name"),
            ({**good, "job": {"namespace": "spark", "name": 7}}, "job.name"),
            ({**good, "eventType": "DONE"}, "eventType must be one of"),
            ({**good, "eventType": ["COMPLETE"]}, "eventType must be one of"),
            ({**good, "eventTime": "yesterday"}, "event 1"),
            ({**good, "run": {"runId": "not-a-uuid"}}, "event 1"),
            ({}, "not an OpenLineage event"),
            ({"eventType": "COMPLETE", "eventTime": good["eventTime"]}, "missing field 'run'"),
        ]
        for event, message in malformed:
            with pytest.raises(requests.HTTPError) as refused:
                transport.emit(event)
            answer = refused.value.response
            assert answer.status_code in (400, 422), (event, answer.text)
            assert message in answer.json()["detail"], (message, answer.text)
        # A JSON array is all or nothing: a bad second event stores the good first one neither.
        r = requests.post(
            base + "/api/v1/lineage",
            json=[good, {**good, "outputs": [1]}],
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        assert r.status_code == 400 and r.json()["detail"].startswith("event 2:")
        assert "Traceback" not in server.log and "internal error" not in server.log
    finally:
        server.stop()
    with ProvenanceRepository.open(open_store(str(tmp_path / "repo"))) as prov:
        # Only the one COMPLETE run (1 input): RECEIVE, CONTENT_MODIFIED, FORK, SEND.
        assert len(prov.get_events(0, 100)) == 4
