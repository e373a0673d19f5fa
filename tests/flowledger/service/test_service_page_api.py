"""What the provenance page asks the service beyond NiFi's API, on a real `flowledger serve`
process: a record key's commit and slices, delta commits with their log files, the summary's
filename and transit URI, OpenLineage runs named by their job, every NiFi search field, and
the icon without a token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from tests.support.keyed_lineage import compacted_lake
from tests.support.page_events import RUN, RUN_EVENT
from tests.support.service import Client, ServiceProcess
from timeline import Table

pytestmark = pytest.mark.unit


def _extra_events(repo: str) -> None:
    t0 = 1_790_000_000_000
    events = [
        ProvenanceEvent(
            "ROUTE", "routed", "route", "RouteOnAttribute", 2048, event_time=t0,
            relationship="large", alternate_identifier_uri="urn:order:77",
            updated_attributes={"filename": "big-order.json", "customer": "acme"},
        ),
        ProvenanceEvent(
            "SEND", "sent", "put", "PutS3Object", 10, event_time=t0 + 1,
            transit_uri="s3://lake/orders/small.json",
            updated_attributes={"filename": "small.json", "customer": "zeta"},
        ),
    ]  # fmt: skip
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(events, sync=True)


def _unkeyed_table(repo: str) -> None:
    Table.create(open_store(repo).scoped("tables/plain")).write(pa.table({"id": [1]}))


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    lake = compacted_lake(tmp_path_factory.mktemp("page-api"))
    _extra_events(lake.repo)
    _unkeyed_table(lake.repo)
    proc = ServiceProcess(lake.repo)
    yield proc.client
    proc.stop()


def _search(api: Client, **request: Any) -> list[dict[str, Any]]:
    body = {"provenance": {"request": {"summarize": True, "maxResults": 100, **request}}}
    r = api.post("/nifi-api/provenance", body)
    assert r.status == 201, r.body
    return list(r.json()["provenance"]["results"]["provenanceEvents"])


def test_every_nifi_search_field_and_the_summary_columns(api: Client) -> None:
    def ids(**terms: str) -> set[str]:
        found = _search(api, searchTerms={k: {"value": v} for k, v in terms.items()})
        return {e["flowFileUuid"] for e in found}

    assert ids(Filename="big-order.json") == {"routed"}
    assert ids(TransitURI="s3://lake/orders/*") == {"sent"}
    assert ids(AlternateIdentifierURI="urn:order:77") == {"routed"}
    assert ids(Relationship="large") == {"routed"}
    assert ids(customer="zeta") == {"sent"}  # an attribute, by its name
    big = _search(api, minimumFileSize="1 KB", searchTerms={"customer": {"value": "*"}})
    assert {e["flowFileUuid"] for e in big} == {"routed"}
    small = _search(api, maximumFileSize=100, searchTerms={"customer": {"value": "*"}})
    assert {e["flowFileUuid"] for e in small} == {"sent"}
    # The summary (the page's result table) carries the filename and the transit URI.
    assert (small[0]["filename"], small[0]["transitUri"]) == (
        "small.json",
        "s3://lake/orders/small.json",
    )


def test_a_record_key_leads_to_its_commit_and_the_raw_inputs(api: Client) -> None:
    """Key 2 was last written by the correction (a delta commit of one log file): the lookup
    names that commit and its slice, whose ancestors include the raw inputs of both writes."""
    r = api.get("/tables/t/records?key=2")
    assert r.status == 200, r.body
    found = r.json()
    timeline = api.get("/tables/t/timeline").json()["instants"]
    correction = [i for i in timeline if i.get("log_files")]
    assert [i["instant_time"] for i in correction] == [found["commitTime"]]
    first = found["slices"][0]
    assert first["eventType"] == "SEND" and first["mayHoldKey"]
    assert first["transitUri"].endswith(".log")
    body = {
        "lineage": {"request": {"lineageRequestType": "FLOWFILE", "uuid": first["flowFileUuid"]}}
    }
    graph = api.post("/nifi-api/provenance/lineage", body).json()["lineage"]["results"]
    join = next(n for n in graph["nodes"] if n.get("eventType") == "JOIN")
    parents = {
        "lineage": {"request": {"lineageRequestType": "PARENTS", "eventId": join["eventId"]}}
    }
    up = api.post("/nifi-api/provenance/lineage", parents).json()["lineage"]["results"]
    assert len(up["flowFileUuids"]) >= 2  # the job's FlowFile and the slice it replaced
    assert api.get("/tables/t/records?key=99").status == 404


def test_an_unkeyed_table_has_no_record_keys_to_look_up(api: Client) -> None:
    r = api.get("/tables/plain/records?key=1")
    assert r.status == 400 and "is not keyed" in r.json()["detail"], r.body


@pytest.mark.parametrize("archived", ["false", "true"])
def test_delta_commits_count_the_rows_of_their_log_files(api: Client, archived: str) -> None:
    instants = api.get(f"/tables/t/timeline?archived={archived}").json()["instants"]
    delta = next(i for i in instants if i.get("log_files"))
    assert (delta["action"], delta["files_added"], delta["log_files"], delta["rows"]) == (
        "deltacommit",
        0,
        1,
        2,
    )


def test_openlineage_runs_are_named_by_their_job(api: Client) -> None:
    r = api.post("/api/v1/lineage", RUN_EVENT)
    assert r.status == 201, r.body
    found = _search(api, searchTerms={"ProcessorID": {"value": RUN}})
    assert found and {e["componentName"] for e in found} == {"spark/etl.write_orders"}
    assert {e["componentId"] for e in found} == {RUN}  # NiFi's id is still the run's


def test_the_icon_needs_no_token(api: Client) -> None:
    r = api.get("/favicon.ico", token=None)
    assert r.status == 200 and r.headers["content-type"].startswith("image/svg+xml")
    assert api.get("/static/favicon.svg", token=None).status == 200
