"""The pipeline's stage-level provenance without Spark: sessions per stage, deterministic
file UUIDs, and the lineage of a curated file reaching the raw CSV files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.pipeline import Recorder, file_uuid, mor, raw_files, trace
from flowledger.pipeline import tables as tbl
from flowledger.pipeline.sources import parse_csv
from flowledger.slice_provenance import CommitJob, slice_uuid
from flowledger.spark import CommitInfo, OutputFile, SparkJobInfo
from provenance import ProvenanceSettings, Query, SearchTerm
from provenance.session import FlowRepository
from storage import LocalObjectStore
from storage.content import ContentRepositorySettings

pytestmark = pytest.mark.unit


@pytest.fixture
def flow(tmp_path: Path) -> Iterator[FlowRepository]:
    repo = FlowRepository.open(
        LocalObjectStore(str(tmp_path / "repo")),
        content_settings=ContentRepositorySettings(
            archive_cleanup_frequency=0, cleanup_on_start=False
        ),
        provenance_settings=ProvenanceSettings(cache_dir=str(tmp_path / "cache")),
    )
    yield repo
    repo.close()


def commit(table: str, uris: list[str]) -> CommitInfo:
    files = tuple(OutputFile(u, 10, 100, "month=1") for u in uris)
    return CommitInfo(
        table,
        "20130101000000000",
        "replacecommit",
        "insert_overwrite",
        files,
        SparkJobInfo("app-1", "test", "flowledger.write"),
    )


def test_curated_file_lineage_reaches_the_raw_csv_files(flow: FlowRepository) -> None:
    small = [f for f in raw_files() if f.name != "flights"]
    weather = next(f for f in small if f.name == "weather")
    flights_bytes = b"year,month,carrier\n2013,1,UA\n2013,1,AA\n"
    from flowledger.pipeline.sources import RawFile

    flights = RawFile("flights", weather.path.parent / "flights.csv.zip", "flights.csv")
    rec = Recorder(flow, "run-1")
    raw = [(flights, flights_bytes), *[(f, f.read_bytes()) for f in small]]
    landed = rec.land(raw)
    assert flow.content.read_bytes(landed["flights"].content_claim) == flights_bytes  # type: ignore[arg-type]
    tables = {f.name: parse_csv(f.name, data) for f, data in raw}
    cleaned = rec.cleaned(landed, tables)
    assert cleaned["weather"].attributes["record.count"] == str(tables["weather"].num_rows)
    parents = [cleaned[n] for n in ("flights", "weather", "airports", "planes")]
    enriched = rec.joined(parents, 2, "flights_enriched")
    carriers = rec.split(enriched, {"UA": 1, "AA": 1})
    uris = [f"file:///lake/tables/flights_enriched/part-{i}.parquet" for i in range(2)]
    data = {u: f"bytes of {u}".encode() for u in uris}
    files = rec.sent(
        enriched, commit("file:///lake/tables/flights_enriched", uris), data.__getitem__
    )
    assert [f.uuid for f in files] == [file_uuid(u) for u in uris]  # deterministic per file
    rec.sent(
        [*carriers.values(), cleaned["airlines"]],
        commit("file:///lake/tables/delays_by_carrier", ["file:///lake/d.parquet"]),
        lambda _: b"delays",
    )

    node = trace(flow.provenance, files[0].uuid)
    reached = {e.transit_uri for e in node.sources()}
    assert flights.uri in reached and weather.uri in reached
    assert any(e.event_type == "SEND" and e.transit_uri == uris[0] for e in node.events)
    _, rows = flow.provenance.sql("SELECT event_type, count(*) FROM provenance GROUP BY 1")
    counts = {t: n for t, n in rows}
    assert counts["RECEIVE"] == len(raw) and counts["CONTENT_MODIFIED"] == len(raw)
    assert counts["SEND"] == len(uris) + 1
    assert counts["JOIN"] == 2  # flights_enriched, and the delays file from the carriers
    assert counts["FORK"] == 2  # the split per carrier, and the flights_enriched files
    send = flow.provenance.get_event(
        next(e.event_id for e in node.events if e.event_type == "SEND")
    )
    assert send.file_size == len(data[uris[0]])  # the SEND holds the file's bytes (replayable)


def test_parse_csv_types_and_nulls() -> None:
    planes = next(f for f in raw_files() if f.name == "planes")
    table = parse_csv("planes", planes.read_bytes())
    assert table.schema.field("year").type == pa.int32()
    assert table.column("speed").null_count > 0  # "NA" is a null, not a string
    assert table.num_rows == planes.read_bytes().count(b"\n") - 1


def test_cli_has_pipeline_demo_and_tour() -> None:
    out = CliRunner().invoke(app, ["--help"]).output
    assert "pipeline" in out and "demo" in out and "tour" in out
    run_help = CliRunner().invoke(app, ["pipeline", "run", "--help"]).output
    assert "--repo" in run_help and "--spark-master" in run_help


def test_merge_on_read_correction_logs_and_compaction_provenance(
    flow: FlowRepository, tmp_path: Path
) -> None:
    """The correction's delta commits write log files (each recorded as a FlowFile joined from
    its slice's base file); the read-optimized read misses them until the compaction, whose
    new base file is joined from the logs it folded."""
    lake = tmp_path / "lake"
    tables = tbl.Tables(lake.resolve().as_uri(), LocalObjectStore(str(lake)))
    fe = tables.keyed(tbl.FLIGHTS_ENRICHED)
    assert fe.settings.compaction_mode == "off"  # the pipeline compacts explicitly
    rows = pa.table({"flight_id": ["a", "b", "c"], "month": [12, 12, 12], "revision": [1, 1, 1]})
    prov, job = flow.provenance, CommitJob(component_id="test", parents=("joined",))
    first = fe.entry(fe.write(rows, mode="overwrite").time)
    (base,) = mor.record_write(prov, fe, first, job)
    up = fe.entry(fe.upsert(pa.table({"flight_id": ["a"], "month": [12], "revision": [2]})).time)
    gone = fe.entry(fe.delete(pa.table({"flight_id": ["b"]})).time)
    assert up.action == gone.action == "deltacommit" and not up.added  # logs, no base file
    logs = mor.record_write(prov, fe, up, job) + mor.record_write(prov, fe, gone, job)
    assert mor.record_write(prov, fe, up, job) == logs[:1]  # recorded once

    def events(uuid: str, kind: str) -> list[Any]:
        found = prov.query(Query((SearchTerm("flowfile_uuid", uuid),), max_results=10))
        return [e for e in found if e.event_type == kind]

    uris = [fe.store.url(lf["path"]) for e in (up, gone) for lf in e.metadata["log_files"]]
    assert logs == [slice_uuid(u) for u in uris]
    for u, uri in zip(logs, uris, strict=True):
        assert [e.transit_uri for e in events(u, "SEND")] == [uri]
        (join,) = events(u, "JOIN")
        assert set(join.parent_uuids) == {"joined", base}

    m = mor.compact(tables, prov)
    assert (m.snapshot_before.rows, m.snapshot_before.corrected) == (2, 1)
    assert (m.read_optimized_before.rows, m.read_optimized_before.corrected) == (3, 0)
    assert m.groups_with_logs == 1 and m.log_files == 2 and m.groups_compacted == 1
    assert m.snapshot_after == m.read_optimized_after == m.snapshot_before
    assert [(a, s) for _, a, s in m.states] == [
        ("compaction", "requested"),
        ("compaction", "inflight"),
        ("commit", "completed"),
    ]
    (compacted,) = fe.entry(m.instant).added
    (join,) = events(slice_uuid(fe.store.url(compacted.path)), "JOIN")
    assert set(join.parent_uuids) == {*logs, base}
