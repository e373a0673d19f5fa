"""`flowledger table files`: exactly the data files a snapshot reads, for engines that read
Parquet files themselves (DuckDB, Polars, Spark, pyarrow). A table's folder also holds the
files of replaced slices, of rolled-back and uncommitted writes and merge-on-read log files:
a reader of the folder counts rows the table does not hold. Only the timeline knows which
files a snapshot reads, so the list comes from commit metadata, never from listing."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from timeline import Table

from ..errors import LogsNotCompacted
from ..output import emit_json
from .options import AsOfOption, JsonOption
from .timeline import open_table

ReadOptimizedOption = Annotated[
    bool,
    typer.Option(
        "--read-optimized",
        help="Merge-on-read: list the base files (Hudi's read-optimized query: changes still in "
        "log files are not seen) instead of refusing a snapshot with logs",
    ),
]


def snapshot_files(table: Table, as_of: str | None, read_optimized: bool) -> dict[str, Any]:
    """The files the snapshot reads (full URIs, with rows and bytes) as a JSON document;
    refuses a merge-on-read snapshot with logs not compacted yet (a Parquet reader cannot
    merge them) unless `read_optimized`."""
    snap = table.snapshot(as_of)
    slices = table.merge_on_read_slices(as_of) or []
    logs = sum(len(sl.logs) for sl in slices)
    if logs and not read_optimized:
        groups = sum(1 for sl in slices if sl.logs)
        raise LogsNotCompacted(
            f"table files: the snapshot of {table.uri} at {snap.instant_time} has {logs} log "
            f"file(s) in {groups} file group(s) not compacted yet, which a Parquet reader cannot "
            "merge: run `flowledger timeline compact --table URI` first, or pass "
            "--read-optimized for the base files only (changes still in logs not seen)"
        )
    return {
        "table": table.uri,
        "instant_time": snap.instant_time,
        "read_optimized": bool(read_optimized and logs),
        "rows": snap.rows,
        "files": [
            {"uri": table.store.url(f.path), "rows": f.rows, "size": f.size} for f in snap.files
        ],
    }


def files(
    ctx: typer.Context,
    table_uri: Annotated[
        str, typer.Argument(help="Table URI: ./flowledger-data/tables/t1, s3://...")
    ],
    as_of: AsOfOption = None,
    read_optimized: ReadOptimizedOption = False,
    as_json: JsonOption = False,
) -> None:
    """List exactly the data files the table's snapshot reads (full URIs, one a line), for
    DuckDB, Polars or Spark to read; refuses a merge-on-read snapshot whose logs are not
    compacted unless --read-optimized."""
    doc = snapshot_files(open_table(ctx, table_uri), as_of, read_optimized)
    if as_json:
        emit_json(doc)
        return
    for f in doc["files"]:
        print(f["uri"])
