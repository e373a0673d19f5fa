"""The whole pipeline on Spark: on the embedded default (full data, run twice) and on MinIO
over s3a. One run per backend in a module-scoped fixture; many assertions on each."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from rich.console import Console

from flowledger.pipeline import (
    PipelineOptions,
    PipelineResult,
    file_uuid,
    print_result,
    raw_files,
    run_pipeline,
)
from flowledger.pipeline import tables as tbl
from flowledger.pipeline.sources import parse_csv
from storage import open_store
from tests.support.paths import REPO_ROOT
from tests.support.servers import S3Endpoint
from timeline import Table

pytestmark = pytest.mark.spark

#: Flights in the MinIO run (the local run uses all of them).
MINIO_SAMPLE = 30_000
#: The sample is the first flights of the year: correct a month it holds.
MINIO_MONTH = 1


@dataclass
class Runs:
    repo: str
    first: PipelineResult
    second: PipelineResult | None
    output: str


def source_flights() -> Any:
    f = next(f for f in raw_files() if f.name == "flights")
    return parse_csv("flights", f.read_bytes())


def run(
    repo: str, spark: Any, sample: int | None = None, month: int = 12
) -> tuple[PipelineResult, str]:
    buf = io.StringIO()
    console = Console(file=buf, width=200)
    options = PipelineOptions(repo, sample=sample, correction_month=month)
    result = run_pipeline(options, console, spark=spark)
    print_result(result, console)
    return result, buf.getvalue()


@pytest.fixture(scope="module")
def local(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    repo = str(tmp_path_factory.mktemp("pipeline") / "flowledger-data")
    first, out = run(repo, spark)
    second, _ = run(repo, spark)
    return Runs(repo, first, second, out)


@pytest.fixture(scope="module")
def on_minio(spark: Any, minio: S3Endpoint) -> Iterator[Runs]:
    bucket = minio.new_bucket()
    env = {
        "AWS_ENDPOINT_URL": minio.endpoint,
        "AWS_ACCESS_KEY_ID": minio.access_key,
        "AWS_SECRET_ACCESS_KEY": minio.secret_key,
        "AWS_REGION": minio.region,
    }
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        repo = f"s3://{bucket}/lake"
        first, out = run(repo, spark, MINIO_SAMPLE, MINIO_MONTH)
        yield Runs(repo, first, None, out)


def check_run(
    r: PipelineResult, flights_in: int, carriers: int, spark: Any, month: int = 12
) -> None:
    assert r.input_rows["flights"] == flights_in
    fix = r.correction
    assert fix is not None and fix.month == month and fix.upserted and fix.deleted
    kept = flights_in - fix.deleted  # the correction deleted the month's cancelled flights
    assert r.table_rows[tbl.FLIGHTS_ENRICHED] == kept  # left joins keep every flight
    assert r.table_rows[tbl.DELAYS_BY_CARRIER] == carriers
    for name in (tbl.FLIGHTS_ENRICHED, tbl.DELAYS_BY_CARRIER):  # table check after maintenance
        assert "; check: ok (" in r.maintenance[name], r.maintenance[name]
    delays = tbl.read(spark, r.table_uris[tbl.DELAYS_BY_CARRIER]).toArrow()
    # Recomputed from the changes only, yet equal to a full recomputation.
    assert pc.sum(delays.column("flights")).as_py() == kept
    # Upsert and delete by key appended log files to the month's file group only (delta
    # commits of a merge-on-read table): no base file was rewritten.
    logged = [s for s in fix.slices if s.logs]
    assert logged and {s.partition for s in logged} == {f"month={month}"}
    assert all(s.logs == 2 for s in logged)  # one per delta commit
    assert sum(s.log_rows for s in logged) == fix.upserted + fix.deleted
    assert all(s.after == s.before for s in fix.slices)
    timeline = {t: (action, state) for t, action, state in r.timelines[tbl.FLIGHTS_ENRICHED]}
    assert timeline[fix.upsert_instant] == ("deltacommit", "completed")
    assert timeline[fix.delete_instant] == ("deltacommit", "completed")
    # Until the compaction the read-optimized read misses the changes still in logs; the
    # compaction folds them into base files and both reads agree.
    m = r.compaction
    assert m is not None and m.instant and m.groups_compacted == len(logged)
    assert m.snapshot_before.rows == kept and m.snapshot_before.corrected == fix.upserted
    assert m.read_optimized_before.rows == flights_in and m.read_optimized_before.corrected == 0
    assert m.snapshot_after == m.read_optimized_after == m.snapshot_before
    assert [(a, st) for _, a, st in m.states] == [
        ("compaction", "requested"),
        ("compaction", "inflight"),
        ("commit", "completed"),
    ]
    assert timeline[m.instant] == ("commit", "completed")
    # The incremental read saw exactly the correction's changes.
    assert fix.changed_rows == fix.upserted + fix.deleted
    assert fix.ops == {"u": fix.upserted, "d": fix.deleted}
    assert fix.changes_since == r.commits[0].instant_time and fix.delays_instant
    # The SQL answer joins a corrected row (its commit time) to the raw files it came from.
    cols = fix.sql_columns
    answer = [dict(zip(cols, row, strict=True)) for row in fix.sql_rows]
    assert {a["written_by"] for a in answer} == {fix.upsert_instant}
    assert {a["revision"] for a in answer} == {2}
    assert {"flights.csv", "weather.csv"} <= {a["input_file"] for a in answer}
    enriched = tbl.read(spark, r.table_uris[tbl.FLIGHTS_ENRICHED])
    revisions = {
        row["month"]: row["revision"]
        for row in enriched.groupBy("month")
        .max("revision")
        .withColumnRenamed("max(revision)", "revision")
        .collect()
    }
    assert revisions[month] == 2 and all(v == 1 for m, v in revisions.items() if m != month)
    # Lineage of the newest current file (written by the compaction, after the first write's
    # files were replaced) reaches the raw inputs; it is the file's own FlowFile.
    assert r.lineage is not None and r.curated_file is not None
    assert r.lineage.uuid == file_uuid(r.curated_file)
    assert m.instant in r.curated_file.rsplit("/", 1)[-1]
    reached = {(e.transit_uri or "").rsplit("/", 1)[-1] for e in r.lineage.sources()}
    assert {"flights.csv", "weather.csv", "airports.csv", "planes.csv"} <= reached
    # Plain DuckDB over the files `table files` lists reads exactly the table's rows.
    if r.repo_uri.startswith("file://"):
        assert {o.table for o in r.outside} == set(r.table_rows)
        for o in r.outside:
            assert o.rows_listed == o.table_rows == r.table_rows[o.table], o
            assert o.rows_in_folder >= o.table_rows, o
    # Marquez's API lists a flowledger job that wrote each table.
    wrote = {name for j in r.marquez for name in j.outputs}
    assert set(r.table_rows) <= wrote, r.marquez
    counts = dict(r.event_counts)
    assert counts["RECEIVE"] >= len(r.input_rows)
    assert counts["SEND"] >= sum(len(c.files) for c in r.commits)
    # The replayed SEND re-emits exactly the curated file's bytes (the pipeline records its
    # SENDs itself, with content; its writes run no Spark commit hook).
    assert r.replay is not None, r.replay_problem
    assert r.replay.claim.length in {f.size for f in r.commits[0].files}
    assert r.answer and all(a["flights_in_rain"] >= 100 for a in r.answer)


def test_local_full_data(local: Runs, spark: Any) -> None:
    flights = source_flights()
    carriers = len(pc.unique(flights.column("carrier")))
    check_run(local.first, flights.num_rows, carriers, spark)
    assert local.first.repo_uri.startswith("file://")
    assert all(f.uri.startswith("file:") for c in local.first.commits for f in c.files)


def test_local_output_shows_lineage_and_answer(local: Runs) -> None:
    assert "Lineage of" in local.output and "flights.csv" in local.output
    assert "weather.csv" in local.output and "Worst mean departure delay in rain" in local.output
    assert "replay of a SEND" in local.output
    assert "Outside readers" in local.output and "jobs in namespace flowledger" in local.output
    out = local.output.replace("\n", " ")
    assert "File slices of flights_enriched after the correction (merge-on-read)" in out
    assert "flights_enriched before compaction" in out
    assert "flights_enriched after compaction: both reads agree" in out
    assert "compaction.requested → compaction.inflight → commit" in out
    assert "delays_by_carrier recomputed incrementally" in out
    assert "A corrected row joined to the input files it came from (SQL)" in out


def test_rerun_appends_a_commit_and_keeps_time_travel(local: Runs, spark: Any) -> None:
    assert local.second is not None
    first_times = {c.instant_time for c in local.first.commits}
    second_times = {c.instant_time for c in local.second.commits}
    assert first_times.isdisjoint(second_times)
    fe = local.first.table_uris[tbl.FLIGHTS_ENRICHED]
    actions = [
        action
        for _, action, state in local.second.timelines[tbl.FLIGHTS_ENRICHED]
        if state == "completed"
    ]
    # The creation, then per run: the full write, the correction's upsert and delete (delta
    # commits) and the compaction (a commit).
    assert actions == ["commit"] + ["replacecommit", "deltacommit", "deltacommit", "commit"] * 2
    n = local.first.input_rows["flights"]
    assert local.first.correction is not None
    kept = n - local.first.correction.deleted
    assert local.second.table_rows[tbl.FLIGHTS_ENRICHED] == kept  # idempotent: not doubled
    as_of = local.first.commits[0].instant_time  # the first run, before its correction
    old = tbl.read(spark, fe, as_of=as_of)
    assert old.count() == n
    assert old.where("month = 12").agg({"revision": "max"}).collect()[0][0] == 1
    table = Table.open(open_store(fe))
    assert table.snapshot(as_of).files  # readable from the timeline alone too


def test_minio_over_s3a(on_minio: Runs, spark: Any) -> None:
    flights = source_flights().slice(0, MINIO_SAMPLE)
    carriers = len(pc.unique(flights.column("carrier")))
    check_run(on_minio.first, MINIO_SAMPLE, carriers, spark, MINIO_MONTH)
    assert on_minio.first.repo_uri.startswith("s3://")
    assert all(f.uri.startswith("s3a://") for c in on_minio.first.commits for f in c.files)
    assert "Lineage of s3a://" in on_minio.output.replace("\n", "")


def test_flowledger_demo_command_on_minio(minio: S3Endpoint, tmp_path: Path) -> None:
    """`flowledger demo --repo s3://...` as a user runs it: its own process and Spark driver,
    the full data, MinIO reached through the standard AWS variables only."""
    bucket = minio.new_bucket()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_"))}
    env.update(
        AWS_ENDPOINT_URL=minio.endpoint,
        AWS_ACCESS_KEY_ID=minio.access_key,
        AWS_SECRET_ACCESS_KEY=minio.secret_key,
        AWS_REGION=minio.region,
        PYTHONPATH=str(REPO_ROOT),
        COLUMNS="200",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "flowledger", "demo", "--repo", f"s3://{bucket}/demo"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.replace("\n", "")
    flights = source_flights().num_rows
    assert f"{flights:,}" in out  # every flight landed and curated
    assert "Lineage of s3a://" in out and "flights.csv" in out and "weather.csv" in out
    assert "replay of a SEND: replayed" in out
    assert "compaction.requested → compaction.inflight → commit" in out
    assert not (tmp_path / "flowledger-data").exists()  # nothing went to the embedded default
