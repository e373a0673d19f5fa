"""The provenance repository as a Spark DataFrame, for histories beyond one machine's DuckDB.

Exactly the committed event files of the provenance table's snapshot (read from its timeline,
never by listing folders), so expired files are not read and a rollover in flight is not seen.
Events still in journals (not rolled over yet) are not included: run `repo.rollover()` first
when they must be. Columns and types are those of the DuckDB view `provenance`.
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


def committed_paths(repo: ProvenanceRepository) -> list[str]:
    """Spark paths (s3a:// or file://) of the committed event files, in event-id order."""
    files = repo.table.committed(fresh=True).files
    return [to_spark_path(repo.store.url(f.events_key)) for f in files]


def provenance(
    spark: Any, repo: str | ProvenanceRepository, settings: StoreSettings | None = None
) -> Any:
    """A DataFrame over the committed provenance events of `repo` (a URI or an open repository),
    with the columns of the DuckDB view `provenance`."""
    if isinstance(repo, ProvenanceRepository):
        paths = committed_paths(repo)
    else:
        with ProvenanceRepository.open(open_store(repo, settings), recover=False) as opened:
            paths = committed_paths(opened)
    schema = ", ".join(f"{c} {SPARK_TYPES[SQL_TYPES[c]]}" for c in VIEW_COLUMNS)
    if not paths:
        return spark.createDataFrame([], schema)
    # Timestamps are UTC instants stored without zone: cast like DuckDB's TIMESTAMP view.
    cols = [f"CAST({c} AS {SPARK_TYPES[SQL_TYPES[c]]}) AS {c}" for c in VIEW_COLUMNS]
    return spark.read.parquet(*paths).selectExpr(*cols)
