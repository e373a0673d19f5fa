"""The pipeline's tables as tools outside flowledger see them: plain DuckDB over exactly the
files a snapshot reads (`flowledger table files`) against DuckDB over the table's folder,
which also holds replaced slices; and the jobs that wrote the tables as Marquez's read API
lists them (`GET /api/v1/namespaces/flowledger/jobs`), so Marquez's client and web UI browse
the same lineage."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from provenance import ProvenanceRepository
from storage import LocalObjectStore, open_store
from timeline import Table

from .. import marquez_catalog
from ..table_files import snapshot_files


@dataclass(frozen=True)
class OutsideRead:
    """Rows of one table three ways: as flowledger reads it, by DuckDB over the files
    `table files` lists, and by DuckDB over every Parquet file in the table's folder."""

    table: str
    files: int
    table_rows: int
    rows_listed: int
    rows_in_folder: int


@dataclass(frozen=True)
class MarquezJob:
    """One job of the `flowledger` namespace: its runs and the datasets it wrote."""

    name: str
    runs: int
    outputs: tuple[str, ...]


def _count(paths: list[str] | str) -> int:
    with duckdb.connect() as con:
        row = con.execute("SELECT count(*) FROM read_parquet(?)", [paths]).fetchone()
    return int(row[0]) if row else 0


def outside_read(name: str, uri: str) -> OutsideRead | None:
    """DuckDB's view of a table on the local filesystem (None elsewhere: an S3 reader needs
    DuckDB's httpfs and credentials, docs/outside-readers.md says how)."""
    store = open_store(uri)
    if not isinstance(store, LocalObjectStore):
        return None
    doc = snapshot_files(Table.open(store), None, read_optimized=False)
    listed = [str(f["uri"]).removeprefix("file://") for f in doc["files"]]
    folder = f"{store.root}/**/*.parquet"
    return OutsideRead(name, len(listed), int(doc["rows"]), _count(listed), _count(folder))


def marquez_jobs(repo: ProvenanceRepository) -> list[MarquezJob]:
    """The jobs flowledger ran itself, as `GET /api/v1/namespaces/flowledger/jobs` lists them."""
    jobs = marquez_catalog.load(repo).jobs()
    return [
        MarquezJob(
            job.name,
            len(runs),
            tuple(sorted({o.name.rsplit("/", 1)[-1] for r in runs for o in r.outputs})),
        )
        for job, runs in sorted(jobs.items(), key=lambda kv: kv[0].name)
        if job.namespace == marquez_catalog.OWN_NAMESPACE
    ]


__all__ = ["MarquezJob", "OutsideRead", "marquez_jobs", "outside_read"]
