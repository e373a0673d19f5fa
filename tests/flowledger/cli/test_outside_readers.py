"""Outside engines, without flowledger, get exactly the right rows by the documented ways in
(docs/outside-readers.md): Polars over `flowledger table files` counts the table's rows, and
plain DuckDB or Polars over the documented provenance glob counts exactly the merged events,
where a glob over the folders counts replaced slices or index rows as well."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from provenance import ProvenanceRepository
from storage import open_store
from tests.support.outside_tables import evolved_table
from tests.support.paths import REPO_ROOT
from tests.support.provenance_events import ev, settings

pytestmark = pytest.mark.unit

#: The documented glob of provenance's merged events (docs/outside-readers.md).
EVENTS_GLOB = "{repo}/provenance/table/data/*/events/*.parquet"


def _listed(uri: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "flowledger", "table", "files", uri]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_polars_over_the_listed_files_reads_exactly_the_tables_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "cow")
    table = evolved_table(uri)
    expected = table.read(columns=["id"]).column("id").to_pylist()

    files = [f.removeprefix("file://") for f in _listed(uri)]
    # Files written before a column was added lack it: read each by name (docs say so).
    scans = [pl.scan_parquet(f) for f in files]
    frame = pl.concat(scans, how="diagonal_relaxed").select("id", "v").collect()
    assert sorted(frame["id"].to_list()) == sorted(expected) and frame.height == 90
    assert frame.filter(pl.col("v") == "x").height == 30  # the second write's rows, 90+ deleted
    whole_folder = pl.scan_parquet(f"{uri}/**/*.parquet", extra_columns="ignore")
    assert whole_folder.select(pl.len()).collect().item() > 90  # replaced slices too


def test_plain_duckdb_with_the_documented_glob_counts_exactly_the_events(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    with ProvenanceRepository.open(open_store(str(repo)), settings(tmp_path)) as prov:
        prov.register_events([ev(i) for i in range(30)], sync=True)
        prov.rollover()
        prov.register_events([ev(i) for i in range(30, 50)], sync=True)
        prov.rollover()
        prov.register_events([ev(i) for i in range(50, 55)], sync=True)  # still in a journal
        _, rows = prov.sql("SELECT count(*) FROM provenance")
        assert rows[0][0] == 55

    glob = EVENTS_GLOB.format(repo=repo)
    found = (
        duckdb.connect()
        .execute(
            f"SELECT count(*), count(DISTINCT event_id), min(event_id), max(event_id) "
            f"FROM read_parquet('{glob}')"
        )
        .fetchone()
    )
    assert found == (50, 50, 0, 49)  # every merged event once; journals are not Parquet
    assert pl.scan_parquet(glob).select(pl.len()).collect().item() == 50
    # The whole folder also holds each merged file's term index: more rows than events.
    row = (
        duckdb.connect()
        .execute(
            f"SELECT count(*) FROM read_parquet('{repo}/provenance/**/*.parquet', "
            "union_by_name=true)"
        )
        .fetchone()
    )
    assert row is not None and row[0] > 50
