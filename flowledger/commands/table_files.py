"""`flowledger table files`: exactly the data files a snapshot reads, as a list or a JSON
document (flowledger/table_files.py says why a reader must not list the folder)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..output import emit_json
from ..table_files import snapshot_files
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
