"""The event lookup's fast path (flowledger/service/fast_events.py): the same answer as the
route, the same token check and limits, and everything it declines still answered by the app."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pydantic_core
import pytest

from flowledger.service.event_routes import memory_entity
from flowledger.service.fast_events import EventFastPath, event_id
from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from tests.support.service import TOKEN, ServiceProcess, seed_lineage

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    repo = str(tmp_path_factory.mktemp("fast") / "repo")
    seed_lineage(repo)  # event 0 has content (never the fast path), 1 and 2 have none
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.rollover()  # merged files: what lookups keep decoded in memory
    proc = ServiceProcess(repo, {"FLOWLEDGER_MAX_REQUEST_SIZE": "1000"})
    yield proc
    proc.stop()


def test_same_answer_as_the_route(server: ServiceProcess) -> None:
    api = server.client
    for ident in (0, 1, 2):
        fast = [api.get(f"/nifi-api/provenance-events/{ident}") for _ in range(3)]
        # `bearer` in lower case is valid (RFC 7235) but not the fast path's exact form:
        # FastAPI's route answers it.
        routed = api.get(
            f"/nifi-api/provenance-events/{ident}",
            token=None,
            headers={"Authorization": f"bearer {TOKEN}"},
        )
        assert routed.status == 200, routed.body
        for answer in fast:
            assert answer.status == 200
            assert answer.body == routed.body
            assert answer.headers["content-type"] == routed.headers["content-type"]
    event = json.loads(routed.body)["provenanceEvent"]
    assert event["eventId"] == 2 and event["outputContentAvailable"] is False


def test_token_limits_and_errors_unchanged(server: ServiceProcess) -> None:
    api = server.client
    api.get("/nifi-api/provenance-events/2")  # decoded in memory
    for token in (None, "wrong-token-0123456789", TOKEN + "x", TOKEN[:-1]):
        r = api.get("/nifi-api/provenance-events/2", token=token)
        assert r.status == 401 and r.headers["www-authenticate"] == "Bearer"
        assert "\n" not in r.json()["detail"]
    big = api.request("GET", "/nifi-api/provenance-events/2", raw=b"x" * 2000)
    assert big.status == 413 and "limit" in big.json()["detail"]
    assert api.get("/nifi-api/provenance-events/99").status == 404
    assert api.get("/nifi-api/provenance-events/-1").status in (404, 422)
    assert api.get("/nifi-api/provenance-events/abc").status == 422
    assert (
        api.get("/nifi-api/provenance-events/02").json()
        == api.get("/nifi-api/provenance-events/2").json()
    )
    assert TOKEN not in server.log


def test_event_id_takes_only_canonical_ids() -> None:
    assert event_id("/nifi-api/provenance-events/0") == 0
    assert event_id("/nifi-api/provenance-events/1234") == 1234
    for path in (
        "/nifi-api/provenance-events/",
        "/nifi-api/provenance-events/01",
        "/nifi-api/provenance-events/+1",
        "/nifi-api/provenance-events/-1",
        "/nifi-api/provenance-events/1/content/input",
        "/nifi-api/provenance-events/\u0661",  # a digit, but not ASCII
        "/nifi-api/provenance-events/" + "9" * 19,
        "/nifi-api/provenance/1",
    ):
        assert event_id(path) is None, path


class _Prov:
    def __init__(self, events: dict[int, ProvenanceEvent]) -> None:
        self.events = events

    def cached_event(self, event_id: int) -> ProvenanceEvent | None:
        return self.events.get(event_id)


def _scope(method: str = "GET", path: str = "/nifi-api/provenance-events/7", **h: str) -> Any:
    headers = [(k.replace("_", "-").encode(), v.encode()) for k, v in h.items()]
    return {"type": "http", "method": method, "path": path, "headers": headers}


def test_answers_from_memory_or_declines() -> None:
    event = ProvenanceEvent("DROP", "ff-7", "c", "Drop", 5, event_id=7, event_time=1_000)
    svc: Any = SimpleNamespace(prov=_Prov({7: event}), content=None)
    fast = EventFastPath(TOKEN, lambda: svc)
    auth = f"Bearer {TOKEN}"
    body = fast.answer(_scope(authorization=auth))
    assert body == pydantic_core.to_json(memory_entity(svc, 7))
    assert json.loads(body or b"")["provenanceEvent"]["replayAvailable"] is False
    declined = [
        _scope(),  # no token
        _scope(authorization=f"Bearer {TOKEN}x"),
        _scope(authorization=f"bearer {TOKEN}"),  # valid, but the app's to answer
        _scope("POST", authorization=auth),
        _scope(path="/nifi-api/provenance-events/8", authorization=auth),  # not in memory
        _scope(authorization=auth, content_length="10"),  # a body: the app's size limit
        _scope(authorization=auth, transfer_encoding="chunked"),
    ]
    for scope in declined:
        assert fast.answer(scope) is None, scope
    assert EventFastPath(TOKEN, lambda: None).answer(_scope(authorization=auth)) is None
