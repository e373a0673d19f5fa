"""The demo's pipeline on Spark, then a user's question of every file it leaves current: where
did it come from? After the first write, the late correction (delta commits of log files), the
incremental recompute of `delays_by_carrier`, the compaction and the clean, each current file
of both tables walks back to the raw CSV files it was made of by NiFi's lineage requests, over
the HTTP API of a real `flowledger serve`, through NiFi's own client, nipyapi, and on the page in
headless Chromium (the newest file of each table, found by searching as a user would); and
Marquez's client browses the jobs that wrote both tables."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
from marquez_client import MarquezClient
from rich.console import Console

from flowledger.marquez_catalog import dataset_name
from flowledger.pipeline import PipelineOptions, PipelineResult, raw_files, run_pipeline
from flowledger.pipeline import tables as tbl
from flowledger.slice_provenance import slice_uuid
from storage import open_store
from tests.support.lineage_walk import Event, Submit, all_ancestors, over_http, with_nipyapi
from tests.support.page import Page
from tests.support.service import TOKEN, ServiceProcess
from timeline import Table

pytestmark = pytest.mark.spark

#: The raw files each table's rows came from: every one must be reached. The walk keeps every
#: RECEIVE among the nodes the requests answer, so it may reach more (a `flights_enriched`
#: file also reaches `airlines`).
MADE_OF = {
    tbl.FLIGHTS_ENRICHED: {"flights", "weather", "airports", "planes"},
    tbl.DELAYS_BY_CARRIER: {"flights", "weather", "airports", "planes", "airlines"},
}


@dataclass(frozen=True)
class Demo:
    server: ServiceProcess
    result: PipelineResult
    current: dict[str, list[str]]  # table -> FlowFile UUIDs of the files its snapshot reads
    newest: dict[str, str]  # table -> FlowFile UUID of the current file the newest instant wrote


@pytest.fixture(scope="module")
def demo(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    repo = str(tmp_path_factory.mktemp("walk") / "flowledger-data")
    options = PipelineOptions(repo, sample=30_000, correction_month=1)
    result = run_pipeline(options, Console(file=io.StringIO(), width=200), spark=spark)
    assert result.correction is not None and result.compaction is not None
    current, newest = {}, {}
    for name, uri in result.table_uris.items():
        table = Table.open(open_store(uri))
        current[name] = [slice_uuid(table.store.url(f.path)) for f in table.files()]
        assert current[name], name
        # A data file's name ends with the instant that wrote it: the newest sorts last.
        last = max(table.files(), key=lambda f: f.path.rsplit("_", 1)[-1])
        newest[name] = slice_uuid(table.store.url(last.path))
    proc = ServiceProcess(repo)
    yield Demo(proc, result, current, newest)
    proc.stop()


def _walk_all(demo: Demo, submit: Submit, event: Event) -> None:
    uri_of = {f.uri: f.name for f in raw_files()}
    for name, uuids in demo.current.items():
        for uuid in uuids:
            found = {uri_of[u] for u in all_ancestors(submit, event, uuid) if u in uri_of}
            assert MADE_OF[name] <= found, (name, uuid, found)


def test_every_current_file_of_the_demo_reaches_its_raw_csvs_over_http(demo: Demo) -> None:
    _walk_all(demo, *over_http(demo.server))


def test_every_current_file_of_the_demo_reaches_its_raw_csvs_with_nipyapi(demo: Demo) -> None:
    _walk_all(demo, *with_nipyapi(demo.server))


def test_the_page_walks_the_newest_file_of_each_table_to_its_raw_csvs(
    demo: Demo, browser: object
) -> None:
    """As a user on the page: search the newest file's FlowFile, open the lineage of its SEND,
    "Expand all ancestors"; the RECEIVEs drawn in the graph, read from the page, are of every
    raw CSV the table is made of (the compaction's file of `flights_enriched` included)."""
    uri_of = {f.uri: f.name for f in raw_files()}
    for name, uuid in demo.newest.items():
        p = Page(browser, demo.server.client.base)
        p.search(FlowFileUUID=uuid)
        rows = [r for r in p.all("#events tbody tr") if "SEND" in r.text]
        assert len(rows) == 1, (name, uuid, [r.text for r in p.all("#events tbody tr")])
        rows[0].find_element(p.by.CSS_SELECTOR, "button.show-lineage").click()
        p.present("#graph g.node.event")
        p.css("#expand-ancestors").click()
        p.text_in("expand-status", "links")
        p.present("#sources li.source")
        assert p.error() == "", (name, p.error())
        drawn = set(p.attrs('#graph g.node.event[data-event-type="RECEIVE"]', "data-node-id"))
        listed = {
            li.get_attribute("data-event-id"): li.text.split(" ", 1)
            for li in p.all("#sources li.source")
        }
        assert drawn <= set(listed), (name, sorted(drawn - set(listed)))
        receives = [uri for kind, uri in listed.values() if kind == "RECEIVE"]
        found = {uri_of[uri] for uri in receives if uri in uri_of}
        assert MADE_OF[name] <= found, (name, uuid, found, p.css("#sources").text)


def test_marquez_client_browses_the_jobs_that_wrote_the_demos_tables(demo: Demo) -> None:
    s = demo.server
    marquez = MarquezClient(f"http://{s.host}:{s.port}", api_key=TOKEN)
    jobs = marquez.list_jobs("flowledger")["jobs"]
    for name, uri in demo.result.table_uris.items():
        ds = dataset_name(uri)
        assert marquez.get_dataset(ds.namespace, ds.name)["name"] == ds.name
        writers = [j for j in jobs if {"namespace": ds.namespace, "name": ds.name} in j["outputs"]]
        assert writers, (name, [j["name"] for j in jobs])
        runs = marquez.list_job_runs("flowledger", writers[0]["name"])["runs"]
        assert runs and all(r["state"] == "COMPLETED" for r in runs)
        graph = requests.get(
            f"http://{s.host}:{s.port}/api/v1/lineage",
            params={"nodeId": f"dataset:{ds.namespace}:{ds.name}"},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=60,
        ).json()["graph"]
        assert {n["id"] for n in graph if n["type"] == "JOB"} >= {
            f"job:flowledger:{j['name']}" for j in writers
        }
