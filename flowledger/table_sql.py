"""SQL over a table (`flowledger table sql`, `POST /tables/{name}/sql`): DuckDB over the
table's snapshot (or a time travel, or its changes since an instant), with the view
`provenance` in the same connection, read-only exactly as `provenance sql` is (the
connection comes from `provenance.sql.connect`: external access off, configuration locked,
allowed paths = the files it was given).

How the snapshot's files reach DuckDB (DuckDB cannot fetch httpfs here):
* local backend: read in place, after their checksum is verified;
* S3: the local cache of immutable files provenance already uses (`ParquetSource.download`:
  one GET per file, DOWNLOADS at once, verified before it is renamed into place; a file is
  never rewritten, so the copy never goes stale and later queries cost no request).
  Chosen by measurement over s3fs registered with DuckDB and pyarrow datasets: see
  docs/benchmarks.md ("SQL over a table on S3").
Changes (`--changes-since`, `--cdc`) are computed by the timeline and registered as Arrow.
"""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from provenance import ProvenanceRepository, ProvenanceSettings
from provenance.catalog import Sums
from provenance.objects import ParquetSource, cache_root
from provenance.sql import VIEW, ViewSource
from storage import IntegrityError, ObjectStore
from storage.checksum import format_checksum
from storage.local import LocalObjectStore
from timeline import DataFile, Table, committed_object, parse_as_of
from timeline.keyed import TableType

#: The short alias every table view also gets, so a query can be written once for any table.
ALIAS = "t"


@dataclass(frozen=True)
class TableRead:
    """What the table's view holds: its snapshot (as of an instant), or its changes."""

    as_of: str | None = None
    changes_since: str | None = None
    cdc: bool = False
    full_scan: bool = False

    def __post_init__(self) -> None:
        # Refused here, named as the command line and the service call them.
        if self.as_of is not None:
            parse_as_of(self.as_of, "--as-of/asOf")
        if self.changes_since is not None:
            parse_as_of(self.changes_since, "--changes-since/changesSince")
        if self.changes_since is None and (self.cdc or self.full_scan):
            raise ValueError(
                "cdc and full scan apply to a read of changes (--changes-since, changesSince)"
            )


def table_name(uri: str) -> str:
    """The view's name: the table folder's last segment (`.../tables/flights` -> flights)."""
    return uri.rstrip("/").rsplit("/", 1)[-1] or ALIAS


def _verified_in_place(store: LocalObjectStore, f: DataFile) -> Path:
    path = Path(store.url(f.path).removeprefix("file://"))
    where = store.url(f.path)
    crc, total = 0, 0
    with committed_object(where), open(path, "rb") as fh:
        while block := fh.read(1024 * 1024):
            crc, total = zlib.crc32(block, crc), total + len(block)
    if f.size and total != f.size:
        raise IntegrityError(
            f"{where} is corrupt: {total} bytes, the commit recorded {f.size}", where
        )
    if f.checksum:
        verify_crc = format_checksum(crc)
        if verify_crc != f.checksum:
            raise IntegrityError(
                f"{where} is corrupt: checksum {verify_crc} != recorded {f.checksum}", where
            )
    return path


#: Files fetched at once into the cache (a cold query is bound by GET latency, not bandwidth).
DOWNLOADS = 8


def local_files(store: ObjectStore, files: tuple[DataFile, ...], cache: Path) -> list[Path]:
    """The files as local paths DuckDB may read, each verified against its commit."""
    if isinstance(store, LocalObjectStore):
        return [_verified_in_place(store, f) for f in files]
    source = ParquetSource(store, cache_root(str(cache), store))

    def fetch(f: DataFile) -> Path:
        with committed_object(store.url(f.path)):
            return source.download(f.path, Sums(whole=f.checksum), f.size)

    if len(files) <= 1:
        return [fetch(f) for f in files]
    with ThreadPoolExecutor(
        min(DOWNLOADS, len(files)), thread_name_prefix="flowledger-table-sql"
    ) as pool:
        return list(pool.map(fetch, files))


def table_source(table: Table, read: TableRead, cache: Path | None = None) -> ViewSource:
    """The table's rows for a view: local files of the snapshot, or an Arrow table."""
    if read.changes_since is not None:
        return table.changes(read.changes_since, read.as_of, cdc=read.cdc, full_scan=read.full_scan)
    props = table.properties
    if props is not None and props.table_type == TableType.MERGE_ON_READ:
        # Base files alone would miss the changes still in logs: DuckDB gets the merged rows.
        return table.read(read.as_of)
    snap = table.snapshot(read.as_of)
    if not snap.files:
        schema = table.schema(read.as_of) if snap.seq else None
        return (schema or pa.schema([])).empty_table()
    where = cache or Path(ProvenanceSettings().cache_dir) / "tables"
    return local_files(table.store, snap.files, where)


def connect(
    prov: ProvenanceRepository,
    table: Table,
    read: TableRead = TableRead(),
    name: str | None = None,
    temp_dir: Path | None = None,
    memory_limit_bytes: int | None = None,
) -> duckdb.DuckDBPyConnection:
    """A read-only connection with the views `<name>` and `t` (the table) and `provenance`."""
    source = table_source(table, read)
    view = name or table_name(table.uri)
    # A table named like the provenance view (or `t`) is reached as `t` alone.
    views = {ALIAS: source} if view in (ALIAS, VIEW) else {view: source, ALIAS: source}
    return prov.sql_connection(temp_dir, memory_limit_bytes, views)


__all__ = ["ALIAS", "TableRead", "connect", "local_files", "table_name", "table_source"]
