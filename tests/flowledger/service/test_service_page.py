"""The provenance page's NiFi features and more, in headless Chromium against a real
`flowledger serve`: every NiFi search field, filename and transit URI columns, OpenLineage
runs by job name, content viewed inline, Replay, graph zoom / fit / export and time slider,
delta commits with their log files, and a record key traced to the raw inputs."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from storage.content import ContentClaim, ContentRepository
from tests.support.keyed_lineage import CORRECTION, FIRST, compacted_lake
from tests.support.page import Page
from tests.support.page_events import RUN, RUN_EVENT
from tests.support.paths import REPO_ROOT
from tests.support.service import ServiceProcess

pytestmark = pytest.mark.unit

ARTIFACTS = Path(os.environ.get("FLOWLEDGER_TEST_ARTIFACTS", "test-artifacts"))
CSV = b"id,amount\n1,10\n2,20\n"
JSON = b'{"order":1,"lines":[{"sku":"a","qty":2}]}'
LOG = b"".join(b"line %06d of a large log\n" % i for i in range(5000))  # 125,000 bytes


def _claim(c: ContentClaim, prefix: str = "") -> dict[str, Any]:
    rc = c.resource_claim
    return {
        f"{prefix}content_claim_container": rc.container,
        f"{prefix}content_claim_section": rc.section,
        f"{prefix}content_claim_identifier": rc.identifier,
        f"{prefix}content_claim_offset": c.offset,
        f"{prefix}content_claim_checksum": c.checksum,
    }


def _orders(repo: str) -> None:
    """A CSV received, converted to JSON, routed (relationship, alternate id) and sent."""
    with ContentRepository.open(repo) as content:
        c_csv, c_json = content.write_bytes(CSV), content.write_bytes(JSON)
        c_log = content.write_bytes(LOG)
        content.commit()
    t0 = 1_790_000_000_000
    common: dict[str, Any] = {"component_type": "Processor"}
    events = [
        ProvenanceEvent(
            "RECEIVE", "order", "listen", file_size=len(CSV), event_time=t0,
            transit_uri="http://shop/orders", updated_attributes={"filename": "orders.csv",
            "mime.type": "text/csv", "customer": "acme"}, **_claim(c_csv), **common,
        ),
        ProvenanceEvent(
            "CONTENT_MODIFIED", "order", "convert", file_size=len(JSON), event_time=t0 + 10,
            updated_attributes={"filename": "order.json", "mime.type": "application/json"},
            previous_file_size=len(CSV), **_claim(c_json), **_claim(c_csv, "previous_"),
            **common,
        ),
        ProvenanceEvent(
            "ROUTE", "order", "route", file_size=len(JSON), event_time=t0 + 20,
            relationship="large", alternate_identifier_uri="urn:order:77", **_claim(c_json),
            **common,
        ),
        ProvenanceEvent(
            "SEND", "order", "publish", file_size=len(JSON), event_time=t0 + 30,
            transit_uri="s3://lake/orders/order.json", **_claim(c_json), **common,
        ),
        ProvenanceEvent(
            "RECEIVE", "big-log", "tail", file_size=len(LOG), event_time=t0 + 40,
            transit_uri="file:///var/log/app.log", updated_attributes={"filename": "app.log"},
            **_claim(c_log), **common,
        ),
    ]  # fmt: skip
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(events, sync=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    lake = compacted_lake(tmp_path_factory.mktemp("page"))  # table `t`, keys 1..4
    _orders(lake.repo)
    proc = ServiceProcess(lake.repo)
    assert proc.client.post("/api/v1/lineage", RUN_EVENT).status == 201
    yield proc
    proc.stop()


def _shot(d: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert d.save_screenshot(str(ARTIFACTS / name))
    if os.environ.get("FLOWLEDGER_UPDATE_SCREENSHOT"):
        docs = REPO_ROOT / "docs" / "images"
        docs.mkdir(exist_ok=True)
        shutil.copy(ARTIFACTS / name, docs / name)


def test_search_by_every_nifi_field_with_filename_and_uri_columns(
    server: ServiceProcess, browser: object
) -> None:
    p = Page(browser, server.client.base)
    heads = p.texts("#events thead th")
    assert "filename" in heads and "transit URI" in heads
    # OpenLineage runs are listed by their job, not by the run's UUID.
    run_rows = [r for r in p.texts("#events tbody tr") if "spark/etl.write_orders" in r]
    assert run_rows and not any(RUN in r for r in run_rows)

    rows = p.search(Filename="orders.csv")
    assert len(rows) == 1 and "RECEIVE" in rows[0] and "http://shop/orders" in rows[0]
    assert "orders.csv" in rows[0]
    sent = p.search(TransitURI="s3://lake/orders/*")
    assert len(sent) == 1 and "SEND" in sent[0]
    assert "ROUTE" in p.search(AlternateIdentifierURI="urn:order:77")[0]
    assert "ROUTE" in p.search(Relationship="large")[0]
    assert "RECEIVE" in p.search(attributes="customer=acme")[0]
    small = p.search(FlowFileUUID="order", maximumFileSize="30")
    assert len(small) == 1 and "RECEIVE" in small[0]  # the CSV (21 bytes), not the JSON
    large = p.search(FlowFileUUID="order", minimumFileSize="30 B")
    assert len(large) == 3
    assert p.error() == ""
    _shot(p.d, "search.png")


def test_event_content_view_replay_and_graph_tools(server: ServiceProcess, browser: object) -> None:
    p = Page(browser, server.client.base)
    next(r for r in p.texts("#events tbody tr") if "SEND" in r and "order.json" in r)
    p.search(Filename="orders.csv")[0]
    p.css("#events tbody tr button.show-lineage").click()
    p.present("#graph g.node.event")

    # Content: the CSV shown as a table, the JSON pretty-printed.
    p.node("RECEIVE")
    p.css("#details .view-output").click()
    p.present("#content-view table.csv")
    assert p.texts("#content-view th") == ["id", "amount"]
    assert len(p.all("#content-view tbody tr")) == 2
    p.node("CONTENT_MODIFIED")
    assert p.all("#details .view-input") and p.all("#details .view-output")
    p.css("#details .view-output").click()
    pretty = p.present("#content-view pre.json").text
    assert json.loads(pretty) == json.loads(JSON) and "\n" in pretty

    # Replay: a REPLAY event of the same content, its FlowFile one click away.
    p.node("SEND")
    p.css("#details .view-output").click()
    p.present("#content-view pre.json")
    p.css("#details button.replay").click()
    p.text_in("replay-status", "replayed as event")
    replays = server.client.post(
        "/nifi-api/provenance",
        {"provenance": {"request": {"searchTerms": {"EventType": {"value": "REPLAY"}}}}},
    ).json()["provenance"]["results"]["provenanceEvents"]
    assert len(replays) == 1 and replays[0]["outputContentClaim"]
    _shot(p.d, "event-details.png")

    # Zoom and fit scale the drawing; exports are a standalone SVG and a PNG.
    graph = p.css("#graph")
    width = float(graph.get_attribute("width"))
    p.css("#zoom-in").click()
    assert float(graph.get_attribute("width")) > width
    p.css("#zoom-out").click()
    p.css("#zoom-out").click()
    assert float(graph.get_attribute("width")) < width
    p.css("#zoom-fit").click()
    assert graph.get_attribute("data-scale") not in (None, "", "1")
    p.css("#export-svg").click()
    svg = p.downloaded(".svg").decode()
    assert svg.startswith("<svg") and 'data-event-type="SEND"' in svg and "fill:" in svg
    p.css("#export-png").click()
    assert p.downloaded(".png").startswith(b"\x89PNG\r\n\x1a\n")

    # The time slider hides the events after the chosen time (as NiFi's).
    shown = len(p.all("#graph g.node"))
    p.d.execute_script(
        "const s = document.getElementById('time-slider'); s.value = s.min;"
        "s.dispatchEvent(new Event('input'));"
    )
    assert p.attrs("#graph g.node.event", "data-event-type") == ["RECEIVE"]
    assert "2026" in p.css("#time-label").text
    p.d.execute_script(
        "const s = document.getElementById('time-slider'); s.value = s.max;"
        "s.dispatchEvent(new Event('input'));"
    )
    assert len(p.all("#graph g.node")) == shown

    # A large content is shown in part: its first 64 KiB, and says so.
    p.lineage("big-log")
    p.node("RECEIVE")
    p.css("#details .view-output").click()
    p.text_in("content-view", f"first 65536 of {len(LOG)} bytes")
    shown_text = p.css("#content-view pre").get_attribute("textContent")
    assert LOG.decode().startswith(shown_text) and len(shown_text) == 65536
    assert p.error() == ""


def test_selecting_a_node_keeps_it_and_the_keyboard_focus(
    server: ServiceProcess, browser: object
) -> None:
    """A node chosen with the keyboard (Enter) shows its details and stays the focused element:
    selection marks the node, it does not draw the graph again (which dropped the focus and
    could leave a click on a removed element)."""
    from selenium.webdriver.common.keys import Keys

    p = Page(browser, server.client.base)
    p.search(Filename="orders.csv")
    p.css("#events tbody tr button.show-lineage").click()
    receive = p.present('#graph g[data-event-type="RECEIVE"]')
    p.d.execute_script("arguments[0].focus()", receive)
    receive.send_keys(Keys.ENTER)
    p.text_in("details-title", "RECEIVE")
    focused = p.d.execute_script("return document.activeElement")
    assert focused.get_attribute("data-node-id") == receive.get_attribute("data-node-id")
    assert "selected" in receive.get_attribute("class").split()
    p.node("SEND")  # another node: the selection moves, the RECEIVE is the same element
    assert "selected" not in receive.get_attribute("class").split()
    assert p.error() == ""


def test_timeline_log_files_and_a_record_traced_to_its_raw_inputs(
    server: ServiceProcess, browser: object
) -> None:
    """Key 2 was last written by a correction (a delta commit of one log file), and the table
    compacted since: one click from the key reaches the raw inputs of both writes."""
    p = Page(browser, server.client.base)
    p.css('[data-tab="timeline"]').click()
    p.css("#timeline-form button").click()
    p.present("#instants tbody tr")
    delta = [
        r for r in p.all("#instants tbody tr") if r.get_attribute("data-action") == "deltacommit"
    ]
    logs = [(r.find_element(p.by.CSS_SELECTOR, ".log-files").text,
             r.find_element(p.by.CSS_SELECTOR, ".rows").text) for r in delta]  # fmt: skip
    assert logs == [("", "4"), ("1", "2")]  # the first write, then the correction's log

    p.css("#record-key").send_keys("2")
    p.css("#record-form button").click()
    p.present("#sources li.source")
    sources = p.css("#sources").text
    assert f"Sources ({len(FIRST) + len(CORRECTION)})" in sources, sources
    for uri in (*FIRST, *CORRECTION):
        assert uri in sources
    assert "commit" in p.css("#lineage-record").text
    assert p.error() == ""
    p.css("#zoom-fit").click()
    _shot(p.d, "record-lineage.png")


def test_the_icon_loads_without_a_token(server: ServiceProcess, browser: object) -> None:
    p = Page(browser, server.client.base)
    statuses = p.d.execute_async_script(
        "const done = arguments[0];"
        "Promise.all(['/favicon.ico', document.querySelector('link[rel=icon]').href]"
        ".map((u) => fetch(u).then((r) => r.status))).then(done);"
    )
    assert statuses == [200, 200]
