"""The pipeline's stage-level provenance without Spark: sessions per stage, deterministic
file UUIDs, and the lineage of a curated file reaching the raw CSV files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.pipeline import Recorder, file_uuid, raw_files, trace
from flowledger.pipeline.sources import parse_csv
from flowledger.spark import CommitInfo, OutputFile, SparkJobInfo
from provenance import ProvenanceSettings
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
