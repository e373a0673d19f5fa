"""The provenance repository as a Spark DataFrame, for histories beyond one machine's DuckDB.

What the DuckDB view `provenance` (the CLI's `provenance sql`) shows, from one snapshot of the
repository: the committed event files (read from its timeline, never by listing folders, so
expired files are not read and a rollover in flight is not seen) and the events still in
journals, read on the driver (every event is searchable as soon as its journal is flushed,
here as there). Columns and types are those of the view.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from provenance import ProvenanceRepository
from provenance.schema import SQL_TYPES, VIEW_COLUMNS
from storage import StoreSettings, open_store
from storage.s3a import to_spark_path

#: DuckDB view type -> Spark SQL type.
SPARK_TYPES = MappingProxyType(
    {
        "BIGINT": "bigint",
        "TIMESTAMP": "timestamp",
        "VARCHAR": "string",
        "VARCHAR[]": "array<string>",
        "MAP(VARCHAR, VARCHAR)": "map<string,string>",
    }
)


def provenance(
    spark: Any, repo: str | ProvenanceRepository, settings: StoreSettings | None = None
) -> Any:
    """A DataFrame over every provenance event of `repo` (a URI or an open repository),
    committed or still in a journal, with the columns of the DuckDB view `provenance`."""
    if isinstance(repo, ProvenanceRepository):
        return _frame(spark, repo)
    with ProvenanceRepository.open(open_store(repo, settings), recover=False) as opened:
        return _frame(spark, opened)


def _frame(spark: Any, repo: ProvenanceRepository) -> Any:
    snap = repo.snapshot(0)
    paths = [to_spark_path(repo.store.url(f.events_key)) for f in snap.files]
    recent = repo.unmerged_events(snap)
    # Timestamps are UTC instants stored without zone: cast like DuckDB's TIMESTAMP view.
    cols = [f"CAST({c} AS {SPARK_TYPES[SQL_TYPES[c]]}) AS {c}" for c in VIEW_COLUMNS]
    parts = [spark.read.parquet(*paths).selectExpr(*cols)] if paths else []
    if recent.num_rows:
        # Local rows on the driver, typed as the Parquet reader types the committed files.
        parts.append(spark.createDataFrame(recent.select(list(VIEW_COLUMNS))).selectExpr(*cols))
    if not parts:
        schema = ", ".join(f"{c} {SPARK_TYPES[SQL_TYPES[c]]}" for c in VIEW_COLUMNS)
        return spark.createDataFrame([], schema)
    frame = parts[0]
    for more in parts[1:]:
        frame = frame.unionByName(more)
    return frame
