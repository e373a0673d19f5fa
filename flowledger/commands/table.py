"""`flowledger table ...`: create a keyed table, write Parquet/CSV files as one commit
(append/overwrite, or insert/upsert/delete on a keyed table), read a snapshot or the changes
since an instant (no Spark)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.csv as pacsv
import typer

from provenance import ProvenanceRepository
from provenance import sql as prov_sql
from storage import ErrorKind, open_store
from storage.uri import resolve_repo
from timeline import (
    Instant,
    KeyedIndex,
    Table,
    check_table,
    conform,
    local_parquet,
    merge_schemas,
)
from timeline.keyed import (
    KeyedProperties,
    KeyScope,
    MergeMode,
    TableType,
    WriteOperation,
)

from .. import table_sql
from ..context import CliContext, cli_context
from ..errors import ANSWERS
from ..output import emit_json, instant_json
from ..slice_provenance import CommitJob, SliceProvenance
from ..table_sql import TableRead
from ..uris import canonical
from .options import (
    AsOfOption,
    CdcOption,
    ChangesSinceOption,
    FullScanOption,
    JsonOption,
    RepoOption,
)
from .row_output import ALL, DISPLAY_ROWS, parse_limit, print_count, print_query_rows, print_table
from .table_files import files
from .timeline import open_table

app = typer.Typer(no_args_is_help=True, help="Tables on the timeline, without Spark.")
app.command("files")(files)

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


def _csv(values: list[str] | None) -> list[str]:
    return [c.strip() for v in values or [] for c in v.split(",") if c.strip()]


@app.command()
def create(
    ctx: typer.Context,
    table_uri: UriArg,
    record_key: Annotated[
        str, typer.Option("--record-key", help="Record key column(s), comma-separated")
    ],
    ordering_field: Annotated[
        str | None,
        typer.Option("--ordering-field", help="Ordering (precombine) field: event_time needs it"),
    ] = None,
    partition_by: Annotated[
        list[str] | None, typer.Option("--partition-by", help="Partition column (CSV/repeat)")
    ] = None,
    merge_mode: Annotated[
        str, typer.Option("--merge-mode", help=f"{' or '.join(MergeMode)}")
    ] = MergeMode.COMMIT_TIME.value,
    table_type: Annotated[
        str, typer.Option("--table-type", help=f"{' or '.join(TableType)}")
    ] = TableType.COPY_ON_WRITE.value,
    key_scope: Annotated[
        str,
        typer.Option("--key-scope", help=f"{' or '.join(KeyScope)}: where a record key is unique"),
    ] = KeyScope.GLOBAL.value,
    as_json: JsonOption = False,
) -> None:
    """Create a keyed table (its properties never change afterwards)."""
    props = KeyedProperties.of(
        record_key,
        ordering_field=ordering_field,
        partition_by=_csv(partition_by),
        merge_mode=MergeMode.parse(merge_mode, "--merge-mode"),
        table_type=TableType.parse(table_type, "--table-type"),
        key_scope=KeyScope.parse(key_scope, "--key-scope"),
    )
    table = Table.create(open_store(table_uri), props, cli_context(ctx).table_settings())
    props = table.properties or props  # an existing table's own (e.g. its partition naming)
    if as_json:
        emit_json({"table": table.uri, **props.to_json()})
    else:
        print(f"created {table.uri}: {props.describe()}")


@app.command()
def write(
    ctx: typer.Context,
    table_uri: UriArg,
    files: Annotated[
        list[Path] | None, typer.Argument(exists=True, dir_okay=False, show_default=False)
    ] = None,
    mode: Annotated[str, typer.Option(help="append or overwrite")] = "append",
    operation: Annotated[
        str | None,
        typer.Option(
            "--operation",
            help="Keyed tables: insert, upsert (the default) or delete (FILEs hold the keys)",
        ),
    ] = None,
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            help="With --operation delete: instead of FILEs, one SQL boolean expression over "
            "the table's columns (no statements, subqueries or table functions)",
        ),
    ] = None,
    partition_by: Annotated[
        list[str] | None, typer.Option("--partition-by", help="Partition column (CSV/repeat)")
    ] = None,
    keyed_index: Annotated[
        str | None,
        typer.Option(
            "--keyed-index",
            help=f"With --operation: the index keys are looked up in, {', '.join(KeyedIndex)} "
            "(default auto: the record-level index once `timeline index` built it)",
        ),
    ] = None,
    repo: RepoOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write FILEs (Parquet or CSV) to the table as one commit. A keyed operation on a table
    inside the repository (--repo) records each written file slice's provenance there."""
    index = None if keyed_index is None else KeyedIndex.parse(keyed_index, "--keyed-index")
    if operation is not None:
        done = _keyed_write(ctx, table_uri, files or [], mode, operation, where, repo, index)
        if as_json:
            emit_json(instant_json(done))
        else:
            print(f"committed {done}")
        return
    if where is not None:
        raise ValueError("--where applies to --operation delete")
    if index is not None:
        raise ValueError("--keyed-index applies to a keyed write (--operation)")
    if not files:
        raise ValueError("no FILE given to write")
    data = _load(files)
    if partition_by and isinstance(data, list):
        data = pa.concat_tables(
            [local_parquet(p).read(use_threads=False) for p in data], promote_options="default"
        )
    table = Table.open(open_store(table_uri), cli_context(ctx).table_settings())
    done = table.write(data, mode=mode, partition_by=partition_by or None)
    if as_json:
        emit_json(instant_json(done))
    else:
        print(f"committed {done}")


def _keyed_write(
    ctx: typer.Context,
    table_uri: str,
    files: list[Path],
    mode: str,
    operation: str,
    where: str | None,
    repo: str | None = None,
    keyed_index: KeyedIndex | None = None,
) -> Instant:
    op = WriteOperation.parse(operation, "--operation")
    if mode != "append":
        raise ValueError("--operation and --mode overwrite do not combine (overwrite replaces)")
    if where is not None and (op != WriteOperation.DELETE or files):
        raise ValueError("--where deletes by a predicate: use it with --operation delete alone")
    if not files and where is None:
        raise ValueError(f"no FILE given to {op}")
    settings = cli_context(ctx).table_settings()
    if keyed_index is not None:
        settings = replace(settings, keyed_index=keyed_index)
    table = open_table(ctx, table_uri, settings)
    with _slice_provenance(cli_context(ctx), table, repo, files, op):
        return _keyed_operation(table, files, op, where)


@contextmanager
def _slice_provenance(
    cli: CliContext, table: Table, repo: str | None, files: list[Path], operation: str
) -> Iterator[None]:
    """Install the slice provenance hook when the table lives inside the repository (its
    provenance goes nowhere else; a table elsewhere records none)."""
    repo_uri = canonical(resolve_repo(repo)).rstrip("/") + "/"
    if not canonical(table.uri).startswith(repo_uri):
        yield
        return
    prov = ProvenanceRepository.open(open_store(repo), cli.provenance_settings())
    job = CommitJob(
        component_id=f"flowledger table write --operation {operation}",
        inputs=tuple(f.resolve().as_uri() for f in files),
    )
    table.post_commit.append(SliceProvenance(prov, job))
    try:
        yield
    finally:
        prov.close()


def _keyed_operation(
    table: Table, files: list[Path], operation: WriteOperation, where: str | None
) -> Instant:
    if operation == WriteOperation.DELETE and where is not None:
        return table.delete(where=where)
    data = _load(files)
    if isinstance(data, list):
        import pyarrow.parquet as pq

        data = pa.concat_tables(
            [pq.ParquetFile(p).read(use_threads=False) for p in data], promote_options="default"
        )
    if operation == WriteOperation.DELETE:
        return table.delete(data)
    if operation == WriteOperation.INSERT:
        return table.insert(data)
    return table.upsert(data)


@app.command()
def read(
    ctx: typer.Context,
    table_uri: UriArg,
    as_of: AsOfOption = None,
    count: Annotated[bool, typer.Option("--count", help="Only the row count")] = False,
    limit: Annotated[
        str | None,
        typer.Option(
            "--limit",
            metavar="N|all",
            help=f"Rows to print or put in --json ({ALL!r}: every row); default: "
            f"{DISPLAY_ROWS} printed, all in --json",
        ),
    ] = None,
    read_optimized: Annotated[
        bool,
        typer.Option(
            "--read-optimized",
            help="Base files only (Hudi's read-optimized query): merge-on-read changes still "
            "in log files are not seen; copy-on-write reads the same",
        ),
    ] = False,
    changes_since: ChangesSinceOption = None,
    cdc: CdcOption = False,
    full_scan: FullScanOption = False,
    as_json: JsonOption = False,
) -> None:
    """Read the table's snapshot (optionally as of an instant), or its changes."""
    wanted = parse_limit(limit, "--limit", as_json)
    table = open_table(ctx, table_uri)
    if changes_since is None and (cdc or full_scan):
        raise ValueError("--cdc and --full-scan apply to --changes-since")
    if read_optimized and changes_since is not None:
        raise ValueError("--read-optimized reads a snapshot, not --changes-since")
    if changes_since is not None:
        data = table.changes(changes_since, as_of, cdc=cdc, full_scan=full_scan)
    elif count and not read_optimized and not _has_logs(table):
        snap = table.snapshot(as_of)  # the count from commit metadata: no data file read
        print_count(snap.rows, as_json, files=len(snap.files), instant_time=snap.instant_time)
        return
    else:  # merged rows of a merge-on-read table are only known by reading them
        data = table.read(as_of, read_optimized=read_optimized)
    if count:
        print_count(data.num_rows, as_json)
    else:
        print_table(data, wanted, as_json, table.uri)


def _has_logs(table: Table) -> bool:
    props = table.properties
    return props is not None and props.table_type == TableType.MERGE_ON_READ


#: Exit code of `table check` when the table has problems left: the integrity kind's (committed
#: data missing or failing its checksum; docs/architecture.md, "Errors").
EXIT_PROBLEMS = ANSWERS[ErrorKind.INTEGRITY].exit_code


@app.command()
def check(
    ctx: typer.Context,
    table_uri: UriArg,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Fix what needs no guess (phantom pending instants, the record index, bloom "
            "sidecars, the properties object); say why for the rest",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Verify the table (Delta's FSCK, hudi-cli's validate): every file a retained snapshot or
    a pending plan reads exists and matches its checksum, no completed instant is listed as
    pending, the record index agrees with the files, no key is held twice. One line per
    problem; exit 6 when any is left (docs/tables.md, "Checking a table")."""
    table = open_table(ctx, table_uri)
    report = check_table(table, repair=repair)
    if as_json:
        emit_json(report.to_json())
    else:
        for p in report.problems:
            print(p)
        for r in report.repairs:
            print(r)
        if report.ok:
            print(
                f"{table.uri}: ok ({report.files_checked} files, "
                f"{report.snapshots_checked} snapshots checked)"
            )
    if not report.ok:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command("sql")
def sql(
    ctx: typer.Context,
    table_uri: UriArg,
    query: Annotated[
        str, typer.Argument(help="One SELECT over the table's view (its name, or t) and provenance")
    ],
    as_of: AsOfOption = None,
    changes_since: ChangesSinceOption = None,
    cdc: CdcOption = False,
    full_scan: FullScanOption = False,
    repo: RepoOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run a read-only SQL query over the table (a view named after it, and `t`) and the
    view `provenance` of the repository (DuckDB)."""
    read = TableRead(as_of, changes_since, cdc, full_scan)
    table = open_table(ctx, table_uri)
    prov = ProvenanceRepository.open(
        open_store(repo), cli_context(ctx).provenance_settings(), recover=False
    )
    try:
        con = table_sql.connect(prov, table, read)
        try:
            names, rows = prov_sql.run(con, query, "table sql")
        finally:
            con.close()
    finally:
        prov.close()
    print_query_rows(names, rows, as_json)
