"""Walking a FlowFile's lineage back to the raw inputs as NiFi's clients do it: the FlowFile's
lineage, then PARENTS on every event that names parents until nothing new appears (what the
page's "Expand all ancestors" does), over the service's HTTP API or through `nipyapi`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nipyapi.nifi import (
    ApiClient,
    LineageDTO,
    LineageEntity,
    LineageRequestDTO,
    ProvenanceApi,
    ProvenanceEventsApi,
)
from nipyapi.nifi.configuration import Configuration

from tests.support.service import TOKEN, ServiceProcess

Submit = Callable[[dict[str, Any]], dict[str, Any]]
Event = Callable[[int], dict[str, Any]]


def all_ancestors(submit: Submit, event: Event, uuid: str) -> set[str]:
    """The transit URIs of the RECEIVEs among every ancestor of `uuid`; asserts that each
    PARENTS answer holds every parent its event names."""
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
            got = {m["flowFileUuid"] for m in answer["nodes"]}
            assert set(n["parentUuids"]) <= got, (n, answer)
            nodes.update({m["id"]: m for m in answer["nodes"]})
    receives = [n for n in nodes.values() if n.get("eventType") == "RECEIVE"]
    return {event(int(n["id"]))["transitUri"] for n in receives}


def over_http(server: ServiceProcess) -> tuple[Submit, Event]:
    """Lineage requests and event lookups as raw HTTP calls to `/nifi-api`."""
    client = server.client

    def submit(request: dict[str, Any]) -> dict[str, Any]:
        answer = client.post("/nifi-api/provenance/lineage", {"lineage": {"request": request}})
        assert answer.status == 201, answer.body
        return dict(answer.json()["lineage"]["results"])

    def event(event_id: int) -> dict[str, Any]:
        answer = client.get(f"/nifi-api/provenance-events/{event_id}")
        assert answer.status == 200, answer.body
        return dict(answer.json()["provenanceEvent"])

    return submit, event


def with_nipyapi(server: ServiceProcess) -> tuple[Submit, Event]:
    """The same through NiFi's own client, configured as for NiFi (base URL, bearer token)."""
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

    return submit, event
