"""Marquez's own client (`marquez-python`), unchanged, browses a real `flowledger serve`:
lineage sent by the `openlineage-python` client over OpenLineage's HTTP transport, and the
lineage of flowledger's own jobs (a keyed table's commits, a Spark write). `marquez-python`
has no call for the dataset/job lineage graph: that is read as Marquez's web UI reads it,
`GET /api/v1/lineage?nodeId=...&depth=...`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from marquez_client import MarquezClient
from marquez_client.errors import APIError
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

from flowledger.spark.commit_info import CommitInfo, OutputFile, SparkJobInfo
from flowledger.spark.lineage import events_for_commit
from provenance import ProvenanceRepository
from storage import open_store
from tests.support.keyed_lineage import CORRECTION, FIRST, compacted_lake
from tests.support.service import TOKEN, ServiceProcess

pytestmark = pytest.mark.unit

RUN = str(uuid.UUID("0191d2a4-7b1c-7e2a-9c3d-5f6e7a8b9c0d"))
FAILED = str(uuid.UUID("0191d2a4-7b1c-7e2a-9c3d-5f6e7a8b9c0e"))
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/client/python"


@dataclass(frozen=True)
class Served:
    server: ServiceProcess
    table_uri: str


def _spark_commit(repo: str) -> None:
    files = (OutputFile("s3a://lake/enriched/part-0.parquet", 10, 1234),)
    job = SparkJobInfo("app-7", "enrich", "write enriched",
                       input_files=("s3a://raw/flights/2026-11-25.csv",))  # fmt: skip
    info = CommitInfo("s3a://lake/enriched", "20261125200533000", "commit", "insert", files, job)
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(events_for_commit(info), sync=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("marquez")
    lake = compacted_lake(root)
    _spark_commit(lake.repo)
    proc = ServiceProcess(lake.repo)
    base = f"http://{proc.host}:{proc.port}"
    ol = OpenLineageClient(
        transport=HttpTransport(HttpConfig(url=base, auth=ApiKeyTokenProvider({"apiKey": TOKEN})))
    )
    inputs = [InputDataset(namespace="s3://raw", name="orders/2026-11-25.csv"),
              InputDataset(namespace="s3://raw", name="customers.csv")]  # fmt: skip
    outputs = [OutputDataset(namespace="s3://warehouse", name="orders_daily")]
    job = Job(namespace="analytics", name="orders_daily")

    def event(state: RunState, when: str, run_id: str, read: int, wrote: bool) -> RunEvent:
        return RunEvent(eventType=state, eventTime=when, run=Run(runId=run_id), job=job,
                        producer=PRODUCER, inputs=inputs[:read],
                        outputs=outputs if wrote else [])  # fmt: skip

    ol.emit(event(RunState.START, "2026-11-25T10:00:00Z", RUN, 2, False))
    ol.emit(event(RunState.COMPLETE, "2026-11-25T10:00:05Z", RUN, 2, True))
    ol.emit(event(RunState.FAIL, "2026-11-25T11:00:00Z", FAILED, 1, True))
    table_uri = str(root / "repo" / "tables" / "t")
    yield Served(proc, table_uri)
    proc.stop()


@pytest.fixture(scope="module")
def marquez(served: Served) -> MarquezClient:
    return MarquezClient(f"http://{served.server.host}:{served.server.port}", api_key=TOKEN)


def _lineage(served: Served, node_id: str, depth: int = 20) -> dict[str, Any]:
    s = served.server
    r = requests.get(
        f"http://{s.host}:{s.port}/api/v1/lineage",
        params={"nodeId": node_id, "depth": str(depth)},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_namespaces_jobs_runs_and_datasets_of_openlineage_runs(marquez: MarquezClient) -> None:
    names = {n["name"] for n in marquez.list_namespaces()["namespaces"]}
    assert {"analytics", "s3://raw", "s3://warehouse", "flowledger", "s3://lake"} <= names
    assert marquez.get_namespace("analytics")["name"] == "analytics"

    jobs = marquez.list_jobs("analytics")["jobs"]
    assert [j["name"] for j in jobs] == ["orders_daily"]
    job = marquez.get_job("analytics", "orders_daily")
    assert job["id"] == {"namespace": "analytics", "name": "orders_daily"}
    assert {(d["namespace"], d["name"]) for d in job["inputs"]} == {
        ("s3://raw", "orders/2026-11-25.csv"), ("s3://raw", "customers.csv"),
    }  # fmt: skip
    assert job["outputs"] == [{"namespace": "s3://warehouse", "name": "orders_daily"}]
    assert job["latestRun"]["id"] == FAILED and job["latestRun"]["state"] == "FAILED"

    runs = marquez.list_job_runs("analytics", "orders_daily")["runs"]
    assert [(r["id"], r["state"]) for r in runs] == [(FAILED, "FAILED"), (RUN, "COMPLETED")]
    run = marquez.get_job_run(RUN)
    assert run["state"] == "COMPLETED" and run["jobVersion"]["name"] == "orders_daily"
    assert [v["datasetVersionId"]["name"] for v in run["outputDatasetVersions"]] == ["orders_daily"]
    assert run["startedAt"] == "2026-11-25T10:00:05.000Z"

    datasets = marquez.list_datasets("s3://raw")["datasets"]
    assert {d["name"] for d in datasets} == {
        "orders/2026-11-25.csv", "customers.csv", "flights/2026-11-25.csv",  # the Spark job's
    }  # fmt: skip
    out = marquez.get_dataset("s3://warehouse", "orders_daily")
    assert out["id"] == {"namespace": "s3://warehouse", "name": "orders_daily"}
    with pytest.raises(APIError):
        marquez.get_job("analytics", "no-such-job")
    with pytest.raises(APIError):
        marquez.get_job_run(str(uuid.uuid4()))


def test_lineage_graph_of_an_openlineage_dataset(served: Served) -> None:
    graph = _lineage(served, "dataset:s3://warehouse:orders_daily")["graph"]
    by_id = {n["id"]: n for n in graph}
    job = by_id["job:analytics:orders_daily"]
    assert job["type"] == "JOB" and job["data"]["name"] == "orders_daily"
    assert {e["origin"] for e in job["inEdges"]} == {
        "dataset:s3://raw:orders/2026-11-25.csv", "dataset:s3://raw:customers.csv",
    }  # fmt: skip
    assert job["outEdges"] == [
        {
            "origin": "job:analytics:orders_daily",
            "destination": "dataset:s3://warehouse:orders_daily",
        }
    ]
    assert by_id["dataset:s3://raw:customers.csv"]["type"] == "DATASET"


def test_own_jobs_keyed_commits_and_spark_writes(marquez: MarquezClient, served: Served) -> None:
    own = {j["name"]: j for j in marquez.list_jobs("flowledger")["jobs"]}
    spark = own["enrich"]
    assert spark["outputs"] == [{"namespace": "s3://lake", "name": "enriched"}]
    assert spark["inputs"] == [{"namespace": "s3://raw", "name": "flights/2026-11-25.csv"}]

    table = ("file", served.table_uri)
    writers = [j for j in own.values() if {"namespace": "file", "name": table[1]} in j["outputs"]]
    assert {j["name"] for j in writers} == {"write t", "pipeline.compaction"}
    runs = [r for j in writers for r in marquez.list_job_runs("flowledger", j["name"])["runs"]]
    assert len(runs) == 3  # the first write, the correction, the compaction
    # The table's lineage reaches every raw file both writes read, through its jobs.
    graph = _lineage(served, f"dataset:file:{table[1]}")["graph"]
    raw = {n["data"]["name"] for n in graph if n["type"] == "DATASET"} - {table[1]}
    assert raw == {u.removeprefix("file://") for u in (*FIRST, *CORRECTION)}


def test_unknown_node_and_bad_node_id(served: Served) -> None:
    s = served.server
    base = f"http://{s.host}:{s.port}/api/v1/lineage"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    missing = requests.get(base, params={"nodeId": "dataset:s3://x:y"}, headers=auth, timeout=30)
    assert missing.status_code == 404 and "no node" in missing.json()["detail"]
    bad = requests.get(base, params={"nodeId": "table:x"}, headers=auth, timeout=30)
    assert bad.status_code == 400
    anonymous = requests.get(base, params={"nodeId": "dataset:s3://x:y"}, timeout=30)
    assert anonymous.status_code == 401


def test_catalog_tolerates_a_dataset_path_with_slashes(marquez: MarquezClient) -> None:
    """Names with `/` are quoted by the client (`%2F`) and still found."""
    found = marquez.get_dataset("s3://raw", "orders/2026-11-25.csv")
    assert found["name"] == "orders/2026-11-25.csv"


def test_search_and_all_jobs_as_the_web_ui_asks(served: Served) -> None:
    s = served.server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    base = f"http://{s.host}:{s.port}/api/v1"
    found = requests.get(f"{base}/search", params={"q": "ORDERS"}, headers=auth, timeout=30)
    assert found.status_code == 200, found.text
    hits = {(h["type"], h["namespace"], h["name"]) for h in found.json()["results"]}
    assert hits == {
        ("JOB", "analytics", "orders_daily"),
        ("DATASET", "s3://warehouse", "orders_daily"),
        ("DATASET", "s3://raw", "orders/2026-11-25.csv"),
    }
    only_jobs = requests.get(
        f"{base}/search", params={"q": "orders", "filter": "JOB"}, headers=auth, timeout=30
    ).json()
    assert [h["nodeId"] for h in only_jobs["results"]] == ["job:analytics:orders_daily"]
    every = requests.get(f"{base}/jobs", headers=auth, timeout=30).json()
    assert {j["namespace"] for j in every["jobs"]} == {"analytics", "flowledger"}
    assert every["totalCount"] == len(every["jobs"])
