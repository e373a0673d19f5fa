"""The lineage page in headless Chromium (Debian's chromium + chromedriver, Selenium): search,
open a lineage, check its nodes, click one, expand, download, timeline; save a screenshot."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from storage.content import ContentClaim, ContentRepository
from tests.support.demo_repo import demo_like_repo
from tests.support.keyed_lineage import CORRECTION, FIRST, Lake, compacted_lake
from tests.support.paths import REPO_ROOT
from tests.support.service import TOKEN, ServiceProcess
from timeline import Table

pytestmark = pytest.mark.unit

ARTIFACTS = Path(os.environ.get("FLOWLEDGER_TEST_ARTIFACTS", "test-artifacts"))


def _pipeline_repo(repo: str) -> None:
    """A small pipeline: a CSV received, split into two, one part enriched and sent, the
    other dropped, the two joined back; a table `orders` with a few commits."""
    with ContentRepository.open(repo) as content:
        c_in = content.write_bytes(b"id,amount\n1,10\n2,20\n")
        c_out = content.write_bytes(b"id,amount,eur\n1,10,9.2\n")
        content.commit()

    def claim(c: ContentClaim) -> dict[str, Any]:
        rc = c.resource_claim
        return {
            "content_claim_container": rc.container,
            "content_claim_section": rc.section,
            "content_claim_identifier": rc.identifier,
            "content_claim_offset": c.offset,
            "content_claim_checksum": c.checksum,
        }

    t0 = 1_790_000_000_000
    events = [
        ProvenanceEvent(
            "RECEIVE",
            "order-batch",
            "listen-http",
            "ListenHTTP",
            c_in.length,
            event_time=t0,
            transit_uri="http://shop/orders",
            updated_attributes={"filename": "orders.csv", "mime.type": "text/csv"},
            **claim(c_in),
        ),
        ProvenanceEvent(
            "FORK",
            "order-batch",
            "split",
            "SplitRecord",
            c_in.length,
            event_time=t0 + 10,
            parent_uuids=("order-batch",),
            child_uuids=("order-1", "order-2"),
            **claim(c_in),
        ),
        ProvenanceEvent(
            "CONTENT_MODIFIED",
            "order-1",
            "convert",
            "UpdateRecord",
            c_out.length,
            event_time=t0 + 20,
            updated_attributes={"currency": "EUR"},
            **claim(c_out),
        ),
        ProvenanceEvent(
            "SEND",
            "order-1",
            "publish",
            "PutS3Object",
            c_out.length,
            event_time=t0 + 30,
            transit_uri="s3://lake/orders/1.csv",
            previous_attributes={"currency": "USD"},
            updated_attributes={"currency": "EUR", "filename": "1.csv"},
            **claim(c_out),
        ),
        ProvenanceEvent("DROP", "order-2", "filter", "RouteOnAttribute", 9, event_time=t0 + 25),
        ProvenanceEvent(
            "JOIN",
            "order-summary",
            "merge",
            "MergeRecord",
            40,
            event_time=t0 + 40,
            parent_uuids=("order-1", "order-2"),
        ),
    ]
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(events, sync=True)
    table = Table.open(open_store(repo).scoped("tables/orders"))
    for i in range(3):
        table.write(pa.table({"id": [i], "amount": [10 * i]}))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    repo = str(tmp_path_factory.mktemp("browser") / "repo")
    _pipeline_repo(repo)
    proc = ServiceProcess(repo)
    yield proc
    proc.stop()


def test_lineage_page_search_graph_details_timeline(
    server: ServiceProcess, browser: object
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    d: Any = browser
    wait = WebDriverWait(d, 30)
    d.get(f"{server.client.base}/#token={TOKEN}")
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "connected"))
    assert "token" not in d.current_url
    # As NiFi's page: the latest events are listed before any search, newest first.
    wait.until(ec.text_to_be_present_in_element((By.ID, "search-summary"), "latest"))
    listed = d.find_elements(By.CSS_SELECTOR, "#events tbody tr")
    assert len(listed) == 6 and "JOIN" in listed[0].text

    # Search by component: one event, with a Lineage button.
    d.find_element(By.NAME, "ProcessorID").send_keys("split")
    d.find_element(By.CSS_SELECTOR, "#search-form button").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "search-summary"), "found"))
    row = d.find_element(By.CSS_SELECTOR, "#events tbody tr")
    assert "FORK" in row.text and "order-batch" in row.text

    # Open the lineage of order-1: events as nodes, edges between them.
    d.find_element(By.CSS_SELECTOR, '[data-tab="lineage"]').click()
    box = d.find_element(By.ID, "lineage-uuid")
    box.clear()
    box.send_keys("order-1")
    d.find_element(By.CSS_SELECTOR, "#lineage-form button").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#graph g.node.event")))
    types = {
        n.get_attribute("data-event-type")
        for n in d.find_elements(By.CSS_SELECTOR, "#graph g.node.event")
    }
    assert {"FORK", "CONTENT_MODIFIED", "SEND", "JOIN"} <= types, types
    assert d.find_elements(By.CSS_SELECTOR, "#graph line.edge")

    # Click the SEND node: its attributes, content availability and a download link.
    d.find_element(By.CSS_SELECTOR, '#graph g[data-event-type="SEND"]').click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "details-title"), "SEND"))
    details = d.find_element(By.ID, "details").text
    assert "s3://lake/orders/1.csv" in details and "available" in details
    assert "currency" in details and "EUR" in details and "USD" in details
    d.find_element(By.CSS_SELECTOR, "#details .download-output").click()
    wait.until(lambda _: any(d.downloads.glob("*.csv")))
    saved = next(d.downloads.glob("*.csv"))
    assert saved.read_bytes() == b"id,amount,eur\n1,10,9.2\n"

    # Expand the FORK's parents: the batch's RECEIVE joins the graph.
    receive = '#graph g[data-event-type="RECEIVE"]'
    assert not d.find_elements(By.CSS_SELECTOR, receive)
    d.find_element(By.CSS_SELECTOR, '#graph g[data-event-type="FORK"]').click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "details-title"), "FORK"))
    d.find_element(By.CSS_SELECTOR, "#details .expand-parents").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, receive)))
    nodes = d.find_elements(By.CSS_SELECTOR, "#graph g.node")
    assert "order-batch" in {n.get_attribute("data-node-id") for n in nodes}  # NiFi's node ids
    # ... and its children: order-2 and its DROP.
    d.find_element(By.CSS_SELECTOR, '#graph g[data-event-type="FORK"]').click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "details-title"), "FORK"))
    d.find_element(By.CSS_SELECTOR, "#details .expand-children").click()
    wait.until(
        ec.presence_of_element_located((By.CSS_SELECTOR, '#graph g[data-event-type="DROP"]'))
    )
    d.find_element(By.CSS_SELECTOR, '#graph g[data-event-type="SEND"]').click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "details-title"), "SEND"))

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "lineage.png"
    assert d.save_screenshot(str(shot))
    docs = REPO_ROOT / "docs" / "images"
    if os.environ.get("FLOWLEDGER_UPDATE_SCREENSHOT"):
        docs.mkdir(exist_ok=True)
        shutil.copy(shot, docs / "lineage.png")

    # The table's timeline: three completed commits.
    d.find_element(By.CSS_SELECTOR, '[data-tab="timeline"]').click()
    d.find_element(By.CSS_SELECTOR, "#timeline-form button").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#instants tbody tr")))
    rows = d.find_elements(By.CSS_SELECTOR, "#instants tbody tr")
    assert len(rows) == 3 and all("completed" in r.text for r in rows)
    assert d.find_element(By.ID, "error").text == ""


@pytest.fixture(scope="module")
def pipeline_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServiceProcess, Any]]:
    root = tmp_path_factory.mktemp("browser-pipeline")
    shape = demo_like_repo(str(root / "repo"), root / "scratch")
    proc = ServiceProcess(str(root / "repo"))
    yield proc, shape
    proc.stop()


def test_lineage_page_reaches_the_raw_inputs_in_one_click(
    pipeline_server: tuple[ServiceProcess, Any], browser: object
) -> None:
    """On the pipeline's provenance, a curated file's lineage shows FORK -> FlowFile -> SEND;
    "Expand all ancestors" reaches every raw CSV it came from and lists them as sources."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    server, shape = pipeline_server
    d: Any = browser
    wait = WebDriverWait(d, 60)
    d.get(f"{server.client.base}/#token={TOKEN}")
    wait.until(ec.text_to_be_present_in_element((By.ID, "search-summary"), "latest"))
    sends = [r for r in d.find_elements(By.CSS_SELECTOR, "#events tbody tr") if "SEND" in r.text]
    assert len(sends) == 2
    delays = shape.curated[-1]  # delays_by_carrier: from every raw input
    next(r for r in sends if delays in r.text).find_element(By.CSS_SELECTOR, "button").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#graph g.node.event")))
    events = "#graph g.node.event"

    def types() -> list[str]:
        found = d.find_elements(By.CSS_SELECTOR, events)
        return sorted(n.get_attribute("data-event-type") for n in found)

    assert types() == ["JOIN", "SEND"]

    d.find_element(By.ID, "expand-ancestors").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#sources li.source")))
    upstream = types()
    assert upstream.count("RECEIVE") == 5 and "CONTENT_MODIFIED" in upstream
    assert "FORK" in upstream
    sources = d.find_element(By.ID, "sources").text
    for name in ("flights", "weather", "airports", "planes", "airlines"):
        assert shape.raw_uris[name] in sources, (name, sources)
    assert d.find_element(By.ID, "error").text == ""

    before = d.find_element(By.ID, "expand-status").text  # "N nodes, M links"
    d.find_element(By.ID, "expand-descendants").click()
    wait.until(
        lambda _: (t := d.find_element(By.ID, "expand-status").text) != before and "links" in t
    )
    assert types().count("SEND") == 2  # the other curated file, from the same JOIN
    assert d.find_element(By.ID, "error").text == ""

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "lineage-full.png"
    d.set_window_size(1600, 1100)
    assert d.save_screenshot(str(shot))
    if os.environ.get("FLOWLEDGER_UPDATE_SCREENSHOT"):
        docs = REPO_ROOT / "docs" / "images"
        docs.mkdir(exist_ok=True)
        shutil.copy(shot, docs / "lineage-full.png")


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServiceProcess, Lake]]:
    shape = compacted_lake(tmp_path_factory.mktemp("browser-keyed"))
    proc = ServiceProcess(shape.repo)
    yield proc, shape
    proc.stop()


def test_all_ancestors_of_a_compacted_file_reach_the_raw_inputs_of_every_write(
    keyed_server: tuple[ServiceProcess, Lake], browser: object
) -> None:
    """A keyed table after a first write, a correction and a compaction: "Expand all
    ancestors" from a current file lists the raw inputs of the first write and of the
    correction as sources."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    server, shape = keyed_server
    d: Any = browser
    wait = WebDriverWait(d, 60)
    d.get(f"{server.client.base}/#token={TOKEN}")
    wait.until(ec.text_to_be_present_in_element((By.ID, "search-summary"), "latest"))
    current = shape.current[0]
    rows = d.find_elements(By.CSS_SELECTOR, "#events tbody tr")
    send = next(r for r in rows if "SEND" in r.text and current in r.text)
    send.find_element(By.CSS_SELECTOR, "button").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#graph g.node.event")))
    d.find_element(By.ID, "expand-ancestors").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#sources li.source")))
    sources = d.find_element(By.ID, "sources").text
    assert f"Sources ({len(FIRST) + len(CORRECTION)})" in sources, sources
    for uri in (*FIRST, *CORRECTION):
        assert uri in sources, (uri, sources)
    assert d.find_element(By.ID, "error").text == ""


def test_lineage_page_draws_a_few_hundred_nodes(
    tmp_path_factory: pytest.TempPathFactory, browser: object
) -> None:
    """A FORK into 10 FlowFiles, each forked into 30 that are dropped: all descendants
    expanded is one picture of 623 nodes, drawn without an error, the widest row (300) in
    narrower columns than the usual ones. (One expansion is limited to NiFi's 100 FlowFiles.)"""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    repo = str(tmp_path_factory.mktemp("browser-wide") / "repo")
    t0 = 1_790_000_000_000
    mids = tuple(f"mid-{i}" for i in range(10))
    events = [
        ProvenanceEvent("RECEIVE", "big", "in", "ListenHTTP", 1000, event_time=t0,
                        transit_uri="http://shop/big"),
        ProvenanceEvent("FORK", "big", "split", "SplitRecord", 1000, event_time=t0 + 1,
                        parent_uuids=("big",), child_uuids=mids),
    ]  # fmt: skip
    for m in mids:
        leaves = tuple(f"{m}-{j:02d}" for j in range(30))
        events.append(
            ProvenanceEvent("FORK", m, "split2", "SplitRecord", 100, event_time=t0 + 2,
                            parent_uuids=(m,), child_uuids=leaves)
        )  # fmt: skip
        events += [ProvenanceEvent("DROP", x, "out", "Drop", 5, event_time=t0 + 3) for x in leaves]
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(events, sync=True)
    server = ServiceProcess(repo)
    try:
        d: Any = browser
        wait = WebDriverWait(d, 120)
        d.get(f"{server.client.base}/#token={TOKEN}")
        wait.until(ec.text_to_be_present_in_element((By.ID, "search-summary"), "latest"))
        d.find_element(By.CSS_SELECTOR, '[data-tab="lineage"]').click()
        box = d.find_element(By.ID, "lineage-uuid")
        box.clear()
        box.send_keys("big")
        d.find_element(By.CSS_SELECTOR, "#lineage-form button").click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#graph g.node.event")))
        d.find_element(By.ID, "expand-descendants").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "expand-status"), "links"))
        assert d.find_element(By.ID, "error").text == ""
        nodes = d.find_elements(By.CSS_SELECTOR, "#graph g.node")
        assert len(nodes) == 3 + 10 * 2 + 300 * 2
        width = float(d.find_element(By.ID, "graph").get_attribute("width"))
        assert width < 300 * 170  # the widest row got narrower columns
    finally:
        server.stop()
