"""The real OpenLineage Spark listener in a real Spark job: its file ingests into provenance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from provenance import ProvenanceRepository
from provenance.ancestry import input_files
from provenance.openlineage import ingest
from storage import StoreSettings, open_store
from tests.support.paths import REPO_ROOT
from tests.support.tiers import unavailable

pytestmark = pytest.mark.spark
ROOT = REPO_ROOT


def _listener_jar() -> Path:
    try:
        from infra.openlineage import fetch_jar

        return fetch_jar()
    except Exception as exc:  # no mvn, no network, pyspark missing
        unavailable("spark", f"openlineage-spark jar: {exc}")
        raise


def test_listener_events_of_a_csv_to_parquet_job_ingest(tmp_path: Path) -> None:
    jar = _listener_jar()
    source, target, events = tmp_path / "in", tmp_path / "out", tmp_path / "openlineage.json"
    source.mkdir()
    (source / "a.csv").write_text("id,qty\n1,1\n2,5\n3,7\n")
    (source / "b.csv").write_text("id,qty\n4,2\n")
    # Its own process: the listener is set when a session starts (the shared one has none).
    job = [sys.executable, str(ROOT / "tests/support/openlineage_job.py")]
    run = subprocess.run(
        [*job, str(jar), str(events), str(source), str(target)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    written = pq.read_table(target).num_rows
    completes = [
        json.loads(line)
        for line in events.read_text().splitlines()
        if '"COMPLETE"' in line and json.loads(line).get("outputs")
    ]
    assert len(completes) == 1  # exactly one run wrote something: the Parquet write

    with ProvenanceRepository.open(
        open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    ) as repo:
        with open(events, encoding="utf-8") as fh:
            first = ingest(repo, fh)
        assert first.runs == 1 and first.events == 4
        with open(events, encoding="utf-8") as fh:
            assert ingest(repo, fh).events == 0
        recorded = repo.get_events(0, 100)
        assert [e.event_type for e in recorded] == ["RECEIVE", "CONTENT_MODIFIED", "FORK", "SEND"]
        receive, send = recorded[0], recorded[-1]
        assert receive.transit_uri == "file://" + str(source)
        assert send.transit_uri == "file://" + str(target)
        assert send.updated_attributes["record.count"] == str(written)
        assert {e.component_id for e in recorded} == {completes[0]["run"]["runId"]}
        assert input_files(repo, send.flowfile_uuid) == ["file://" + str(source)]
        _, rows = repo.sql(
            "SELECT count(*) FROM provenance WHERE component_type = 'OpenLineageRun'"
        )
        assert rows == [(4,)]
