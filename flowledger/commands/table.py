"""`flowledger table ...`: write Parquet/CSV files as one commit, read a snapshot (no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.csv as pacsv
import typer
from rich.console import Console
from rich.table import Table as RichTable

from storage import open_store
from timeline import Table
from timeline.parquet_io import local_parquet
from timeline.schema import conform, merge_schemas

from ..output import emit_json, instant_json
from ..table_settings import table_settings
from .options import JsonOption
from .timeline import open_table

app = typer.Typer(no_args_is_help=True, help="Tables on the timeline, without Spark.")

UriArg = Annotated[str, typer.Argument(help="Table URI: ./flowledger-data/tables/t1, s3://...")]


def _load(files: list[Path]) -> pa.Table | list[str]:
    if all(f.suffix.lower() == ".parquet" for f in files):
        return [str(f) for f in files]  # stored as they are
    tables = []
    for f in files:
        if f.suffix.lower() == ".csv":
            tables.append(pacsv.read_csv(f))
        elif f.suffix.lower() == ".parquet":
            tables.append(local_parquet(f).read(use_threads=False))
        else:
            raise ValueError(f"{f}: only .parquet and .csv files can be written")
    # Files of one write must agree like writes of one table do (same evolution rules).
    schema = None
    for f, t in zip(files, tables, strict=True):
        schema = merge_schemas(schema, t.schema, f"{files[0]} with {f}")
    assert schema is not None
    return pa.concat_tables([conform(t, schema) for t in tables])


@app.command()
def write(
    table_uri: UriArg,
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False)],
    mode: Annotated[str, typer.Option(help="append or overwrite")] = "append",
    partition_by: Annotated[
        list[str] | None, typer.Option("--partition-by", help="Partition column (CSV/repeat)")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Write FILEs (Parquet or CSV) to the table as one commit."""
    data = _load(files)
    if partition_by and isinstance(data, list):
        data = pa.concat_tables(
            [local_parquet(p).read(use_threads=False) for p in data], promote_options="default"
        )
    table = Table.open(open_store(table_uri), table_settings())
    done = table.write(data, mode=mode, partition_by=partition_by or None)
    if as_json:
        emit_json(instant_json(done))
    else:
        print(f"committed {done}")


@app.command()
def read(
    table_uri: UriArg,
    as_of: Annotated[str | None, typer.Option("--as-of", help="Instant time")] = None,
    count: Annotated[bool, typer.Option("--count", help="Only the row count")] = False,
    limit: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="Rows to print")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Read the table's snapshot (optionally as of an instant)."""
    table = open_table(table_uri)
    if count:
        snap = table.snapshot(as_of)
        if as_json:
            emit_json(
                {"rows": snap.rows, "files": len(snap.files), "instant_time": snap.instant_time}
            )
        else:
            print(snap.rows)
        return
    data = table.read(as_of)
    rows = data.slice(0, limit).to_pylist() if data.num_rows else []
    if as_json:
        emit_json(rows)
        return
    out = RichTable(*data.column_names, caption=f"{table.uri}: {data.num_rows} rows")
    for r in rows:
        out.add_row(*(str(v) for v in r.values()))
    Console().print(out)
