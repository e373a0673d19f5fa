"""NiFi's own Python client (`nipyapi`, generated from NiFi's REST API definition), unchanged,
against a real `flowledger serve` process over a repository shaped like the demo's: what a
script written for NiFi does — query with NiFi's dates and sizes, poll, lineage, expand, fetch
each node's event by its id, download content with a range, replay and read the new event."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nipyapi.nifi import (
    ApiClient,
    FlowApi,
    LineageDTO,
    LineageEntity,
    LineageRequestDTO,
    ProvenanceApi,
    ProvenanceDTO,
    ProvenanceEntity,
    ProvenanceEventDTO,
    ProvenanceEventsApi,
    ProvenanceRequestDTO,
    ProvenanceSearchValueDTO,
    ReplayLastEventRequestEntity,
    SubmitReplayRequestEntity,
)
from nipyapi.nifi.configuration import Configuration
from nipyapi.nifi.rest import ApiException

from tests.support.demo_repo import DemoRepo, demo_like_repo
from tests.support.service import TOKEN, ServiceProcess

pytestmark = pytest.mark.unit

NIFI_TIMESTAMP = "%m/%d/%Y %H:%M:%S.%f %Z"
#: Fields NiFi leaves unset on one node or for a component it does not know (flowledger has
#: no process groups and no connectors): never required to be populated.
CLUSTER_FIELDS = {"cluster_node_id", "cluster_node_address", "connector_id", "group_id"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServiceProcess, DemoRepo]]:
    root = tmp_path_factory.mktemp("nipyapi")
    repo = str(root / "repo")
    shape = demo_like_repo(repo, root / "scratch")
    proc = ServiceProcess(repo)
    yield proc, shape
    proc.stop()


@pytest.fixture(scope="module")
def client(demo: tuple[ServiceProcess, DemoRepo]) -> ApiClient:
    """nipyapi configured as for NiFi: base URL and bearer token."""
    server, _ = demo
    config = Configuration()
    config.host = f"http://{server.host}:{server.port}/nifi-api"
    config.verify_ssl = False
    config.api_key["bearerAuth"] = TOKEN
    config.api_key_prefix["bearerAuth"] = "Bearer"
    return ApiClient(host=config.host)


def _nifi_time(text: str) -> datetime:
    return datetime.strptime(text, NIFI_TIMESTAMP).replace(tzinfo=UTC)


def _unset(model: Any, allowed: set[str] = CLUSTER_FIELDS) -> set[str]:
    return {f for f in model.swagger_types if getattr(model, f) is None} - allowed


def test_query_poll_delete_with_nifi_dates_sizes_and_summaries(
    client: ApiClient, demo: tuple[ServiceProcess, DemoRepo]
) -> None:
    _, shape = demo
    prov = ProvenanceApi(client)
    now = datetime.now(UTC)
    request = ProvenanceRequestDTO(
        search_terms={"FlowFileUUID": ProvenanceSearchValueDTO(value=shape.landed["flights"])},
        start_date=(now - timedelta(hours=1)).strftime("%m/%d/%Y %H:%M:%S UTC"),
        end_date=(now + timedelta(hours=1)).strftime("%m/%d/%Y %H:%M:%S UTC"),
        minimum_file_size="0 B",
        maximum_file_size="1 MB",
        max_results=100,
        summarize=True,
        incremental_results=False,
        cluster_node_id="ignored-on-one-node",
    )
    submitted = prov.submit_provenance_request(ProvenanceEntity(ProvenanceDTO(request=request)))
    query = submitted.provenance
    assert query.finished is True and query.percent_completed == 100
    assert _nifi_time(query.expiration) - _nifi_time(query.submission_time) == timedelta(minutes=10)
    assert query.request.start_date.endswith(" UTC") and query.request.summarize is True
    results = query.results
    # The landed flights.csv: RECEIVE, CONTENT_MODIFIED, and the JOIN naming it as a parent.
    assert {e.event_type for e in results.provenance_events} == {
        "RECEIVE",
        "CONTENT_MODIFIED",
        "JOIN",
    }
    assert results.total == "3" and results.total_count == 3
    assert results.time_offset == 0 and results.generated.endswith(" UTC")
    summary = results.provenance_events[0]
    assert summary.file_size is not None and summary.event_time.endswith(" UTC")
    assert summary.attributes is None and summary.input_content_available is None

    # Poll, unsummarized: every event fully populated, content availability included.
    full = prov.get_provenance(query.id, summarize=False, incremental_results=True).provenance
    receive = next(e for e in full.results.provenance_events if e.event_type == "RECEIVE")
    assert receive.output_content_available is True and receive.replay_available is True
    assert receive.transit_uri == shape.raw_uris["flights"]
    assert receive.event_timestamp.startswith(_nifi_time(receive.event_time).date().isoformat())

    # Capped: NiFi answers "N+" when the cap was reached.
    capped = prov.submit_provenance_request(
        ProvenanceEntity(ProvenanceDTO(request=ProvenanceRequestDTO(max_results=2)))
    ).provenance.results
    assert capped.total == "2+" and capped.total_count == 2
    # Latest events first, as NiFi's query lists them.
    ids = [e.event_id for e in capped.provenance_events]
    assert ids == sorted(ids, reverse=True)

    prov.delete_provenance(query.id)
    with pytest.raises(ApiException) as gone:
        prov.get_provenance(query.id)
    assert gone.value.status == 404
    options = prov.get_search_options().provenance_options
    assert "FlowFileUUID" in {f.id for f in options.searchable_fields}


def test_lineage_expand_and_every_node_by_its_id(
    client: ApiClient, demo: tuple[ServiceProcess, DemoRepo]
) -> None:
    _, shape = demo
    prov = ProvenanceApi(client)
    events = ProvenanceEventsApi(client)
    curated = shape.curated[0]
    request = LineageRequestDTO(lineage_request_type="FLOWFILE", uuid=curated, cluster_node_id="x")
    lineage = prov.submit_lineage_request(LineageEntity(LineageDTO(request=request))).lineage
    assert lineage.finished is True
    polled = prov.get_lineage(lineage.id).lineage
    nodes = polled.results.nodes
    assert {n.type for n in nodes} == {"EVENT", "FLOWFILE"}
    # The curated file's own lineage: FORK -> FlowFile -> SEND (as NiFi draws it).
    assert sorted(n.event_type for n in nodes if n.type == "EVENT") == ["FORK", "SEND"]
    for node in nodes:
        assert node.timestamp.endswith(" UTC") and node.millis > 0
        if node.type == "EVENT":
            assert node.component_type == "flowledger.pipeline"
            event = events.get_provenance_event(node.id).provenance_event  # NiFi's UI does this
            assert event.id == node.id and event.event_type == node.event_type
        else:
            assert node.id == node.flow_file_uuid
    for link in polled.results.links:
        assert link.millis > 0 and link.timestamp.endswith(" UTC")
        assert {link.source_id, link.target_id} <= {n.id for n in nodes}

    # Expand the FORK's parents, then the JOIN's: reaches flights.csv's RECEIVE.
    fork = next(n for n in nodes if n.event_type == "FORK")
    parents = prov.submit_lineage_request(
        LineageEntity(
            LineageDTO(
                request=LineageRequestDTO(lineage_request_type="PARENTS", event_id=int(fork.id))
            )
        )
    ).lineage.results
    join = next(n for n in parents.nodes if n.event_type == "JOIN")
    upstream = prov.submit_lineage_request(
        LineageEntity(
            LineageDTO(
                request=LineageRequestDTO(lineage_request_type="PARENTS", event_id=int(join.id))
            )
        )
    ).lineage.results
    receives = [n for n in upstream.nodes if n.event_type == "RECEIVE"]
    uris = {events.get_provenance_event(n.id).provenance_event.transit_uri for n in receives}
    assert shape.raw_uris["flights"] in uris
    children = prov.submit_lineage_request(
        LineageEntity(
            LineageDTO(
                request=LineageRequestDTO(lineage_request_type="CHILDREN", event_id=int(fork.id))
            )
        )
    ).lineage
    assert curated in {n.flow_file_uuid for n in children.results.nodes}
    prov.delete_lineage(children.id)
    with pytest.raises(ApiException) as gone:
        prov.get_lineage(children.id)
    assert gone.value.status == 404


def test_event_fully_populated_content_range_and_replay(
    client: ApiClient, demo: tuple[ServiceProcess, DemoRepo]
) -> None:
    server, shape = demo
    prov = ProvenanceApi(client)
    events = ProvenanceEventsApi(client)
    found = prov.submit_provenance_request(
        ProvenanceEntity(
            ProvenanceDTO(
                request=ProvenanceRequestDTO(
                    search_terms={
                        "FlowFileUUID": ProvenanceSearchValueDTO(value=shape.landed["flights"]),
                        "EventType": ProvenanceSearchValueDTO(value="CONTENT_MODIFIED"),
                    }
                )
            )
        )
    ).provenance.results.provenance_events
    assert len(found) == 1
    event: ProvenanceEventDTO = events.get_provenance_event(found[0].id).provenance_event
    # Every field of NiFi's DTO is set for an event with input and output content, except
    # the ones that describe a cluster, a connector or a NiFi process group, and the ones
    # that do not apply to this event type (NiFi leaves them null too).
    not_applicable = {"transit_uri", "relationship", "source_connection_identifier",
                      "source_system_flow_file_id", "alternate_identifier_uri",
                      "replay_explanation", "event_duration", "details"}  # fmt: skip
    assert _unset(event, CLUSTER_FIELDS | not_applicable) == set()
    assert event.input_content_available and event.output_content_available
    assert event.content_equal is False and event.replay_available is True
    assert event.input_content_claim_file_size == "19 bytes"  # flights.csv as landed
    assert event.lineage_duration is not None and event.lineage_duration >= 0
    assert event.component_name == "pipeline.type_and_clean"

    raw = events.get_input_content(event.id, range="bytes=3-8", _preload_content=False)
    assert raw.status == 206 and raw.data == b"flight"
    assert raw.headers["Content-Range"] == "bytes 3-8/19"
    tail = events.get_input_content(event.id, range="bytes=-4", _preload_content=False)
    assert tail.status == 206 and tail.data == b"2,b\n"
    whole = events.get_input_content(event.id, _preload_content=False)
    assert whole.status == 200 and whole.data == b"id,flights\n1,a\n2,b\n"
    output = events.get_output_content(event.id, _preload_content=False)
    assert output.status == 200 and output.data.startswith(b"PAR1")  # the cleaned Parquet
    assert len(output.data) == event.output_content_claim_file_size_bytes

    replayed = events.submit_replay(SubmitReplayRequestEntity(event_id=int(event.id)))
    new = replayed.provenance_event
    assert new.event_type == "REPLAY" and int(new.id) > int(event.id)
    assert new.parent_uuids == [event.flow_file_uuid]
    again = events.get_provenance_event(new.id).provenance_event
    assert again.child_uuids == new.child_uuids and again.output_content_available is True

    latest = events.get_latest_provenance_events("pipeline.type_and_clean", limit=2)
    listed = latest.latest_provenance_events
    assert listed.component_id == "pipeline.type_and_clean"
    assert [e.event_type for e in listed.provenance_events] == ["REPLAY", "CONTENT_MODIFIED"]
    last = events.submit_replay_latest_event(
        ReplayLastEventRequestEntity(component_id="pipeline.type_and_clean", nodes="ALL")
    )
    assert last.aggregate_snapshot.event_available is True
    assert len(last.aggregate_snapshot.events_replayed) == 1

    about = FlowApi(client).get_about_info().about
    assert about.title == "flowledger" and about.timezone == "UTC"
    assert "ERROR" not in server.log and "Traceback" not in server.log


def test_nifi_errors_are_typed_4xx(client: ApiClient) -> None:
    prov = ProvenanceApi(client)
    events = ProvenanceEventsApi(client)
    joins = prov.submit_provenance_request(
        ProvenanceEntity(
            ProvenanceDTO(
                request=ProvenanceRequestDTO(
                    search_terms={"EventType": ProvenanceSearchValueDTO(value="JOIN")}
                )
            )
        )
    ).provenance.results.provenance_events
    bad_date = ProvenanceRequestDTO(start_date="25/11/2026 20:05:33 UTC")
    with pytest.raises(ApiException) as invalid:
        prov.submit_provenance_request(ProvenanceEntity(ProvenanceDTO(request=bad_date)))
    assert invalid.value.status == 422 and "startDate" in invalid.value.body
    with pytest.raises(ApiException) as missing:
        events.get_provenance_event("999999")
    assert missing.value.status == 404
    with pytest.raises(ApiException) as refused:
        events.submit_replay(SubmitReplayRequestEntity(event_id=int(joins[0].id)))
    assert refused.value.status == 409
    with pytest.raises(ApiException) as past_end:
        events.get_output_content("0", range="bytes=999-", _preload_content=False)
    assert past_end.value.status == 416
