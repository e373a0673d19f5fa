"""Plain Spark (no flowledger data source) over the files `flowledger table files` lists reads
exactly the table's rows, as docs/outside-readers.md says; over the table's folder it also
reads every replaced slice. Provenance's events glob reads exactly the merged events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowledger.commands.table_files import snapshot_files
from provenance import ProvenanceRepository
from storage import open_store
from tests.support.outside_tables import evolved_table
from tests.support.provenance_events import ev, settings

pytestmark = pytest.mark.spark


def test_spark_over_the_listed_files_reads_exactly_the_tables_rows(
    spark: Any, tmp_path: Path
) -> None:
    uri = str(tmp_path / "cow")
    table = evolved_table(uri)

    files = [f["uri"] for f in snapshot_files(table, None, False)["files"]]
    df = spark.read.option("mergeSchema", "true").parquet(*files)
    assert df.count() == table.snapshot().rows == 90
    assert df.where("v = 'x'").count() == 30
    assert spark.read.parquet(f"{uri}/data/*/*").count() > 90  # the folder: replaced slices too


def test_spark_over_the_events_glob_reads_exactly_the_events(spark: Any, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    with ProvenanceRepository.open(open_store(str(repo)), settings(tmp_path)) as prov:
        prov.register_events([ev(i) for i in range(40)], sync=True)
        prov.rollover()
    df = spark.read.parquet(f"file://{repo}/provenance/table/data/*/events/*.parquet")
    assert df.count() == df.select("event_id").distinct().count() == 40
