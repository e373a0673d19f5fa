"""Lineage never dead-ends: every file a keyed merge-on-read table leaves current after a first
write, a later correction (delta commit of log files) and a compaction walks back to the raw
inputs by NiFi's lineage requests (FLOWFILE, then PARENTS on every event that names parents),
through the HTTP API of a real `flowledger serve` and through NiFi's own client, nipyapi."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from nipyapi.nifi import (
    ApiClient,
    LineageDTO,
    LineageEntity,
    LineageRequestDTO,
    ProvenanceApi,
    ProvenanceEventsApi,
)
from nipyapi.nifi.configuration import Configuration

from tests.support.keyed_lineage import CORRECTION, FIRST, Lake, compacted_lake
from tests.support.service import TOKEN, ServiceProcess

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServiceProcess, Lake]]:
    shape = compacted_lake(tmp_path_factory.mktemp("lineage"))
    proc = ServiceProcess(shape.repo)
    yield proc, shape
    proc.stop()


Submit = Callable[[dict[str, Any]], dict[str, Any]]


def _all_ancestors(submit: Submit, event: Callable[[int], dict[str, Any]], uuid: str) -> set[str]:
    """What the page's "Expand all ancestors" does: the FlowFile's lineage, then PARENTS on
    every event naming parents until nothing new appears; the transit URIs of its RECEIVEs."""
    nodes = {n["id"]: n for n in submit({"lineageRequestType": "FLOWFILE", "uuid": uuid})["nodes"]}
    expanded: set[int] = set()
    while True:
        wave = [
            n
            for n in nodes.values()
            if n["type"] == "EVENT" and n.get("parentUuids") and int(n["id"]) not in expanded
        ]
        if not wave:
            break
        for n in wave:
            expanded.add(int(n["id"]))
            answer = submit({"lineageRequestType": "PARENTS", "eventId": int(n["id"])})
            # Every named parent is in the answer: a FlowFile node or one of its events.
            got = {m["flowFileUuid"] for m in answer["nodes"]}
            assert set(n["parentUuids"]) <= got, (n, answer)
            nodes.update({m["id"]: m for m in answer["nodes"]})
    receives = [n for n in nodes.values() if n.get("eventType") == "RECEIVE"]
    return {event(int(n["id"]))["transitUri"] for n in receives}


def test_every_current_file_reaches_the_raw_inputs_over_http(
    lake: tuple[ServiceProcess, Lake],
) -> None:
    server, shape = lake
    client = server.client

    def submit(request: dict[str, Any]) -> dict[str, Any]:
        answer = client.post("/nifi-api/provenance/lineage", {"lineage": {"request": request}})
        assert answer.status == 201, answer.body
        return dict(answer.json()["lineage"]["results"])

    def event(event_id: int) -> dict[str, Any]:
        answer = client.get(f"/nifi-api/provenance-events/{event_id}")
        assert answer.status == 200, answer.body
        return dict(answer.json()["provenanceEvent"])

    for uuid in shape.current:
        assert _all_ancestors(submit, event, uuid) == {*FIRST, *CORRECTION}


def test_every_current_file_reaches_the_raw_inputs_with_nipyapi(
    lake: tuple[ServiceProcess, Lake],
) -> None:
    server, shape = lake
    config = Configuration()
    config.host = f"http://{server.host}:{server.port}/nifi-api"
    config.api_key["bearerAuth"] = TOKEN
    config.api_key_prefix["bearerAuth"] = "Bearer"
    api_client = ApiClient(host=config.host)
    prov, events = ProvenanceApi(api_client), ProvenanceEventsApi(api_client)

    def submit(request: dict[str, Any]) -> dict[str, Any]:
        dto = LineageRequestDTO(
            lineage_request_type=request["lineageRequestType"],
            uuid=request.get("uuid"),
            event_id=request.get("eventId"),
        )
        results = prov.submit_lineage_request(LineageEntity(LineageDTO(request=dto))).lineage
        nodes = [
            {
                "id": n.id,
                "type": n.type,
                "flowFileUuid": n.flow_file_uuid,
                "parentUuids": n.parent_uuids or [],
                "eventType": n.event_type,
            }
            for n in results.results.nodes
        ]
        return {"nodes": nodes}

    def event(event_id: int) -> dict[str, Any]:
        e = events.get_provenance_event(str(event_id)).provenance_event
        return {"transitUri": e.transit_uri}

    for uuid in shape.current:
        assert _all_ancestors(submit, event, uuid) == {*FIRST, *CORRECTION}
