"""`flowledger provenance ...`: ingest, SQL, events, lineage, replay, rollover, expire."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

from provenance import ProvenanceEvent, ProvenanceRepository, to_dot, to_svg
from provenance.ingest import ingest_file
from storage import open_store
from storage.timeutil import ms_to_iso

from ..context import cli_context
from ..output import emit_json
from ..progress import reading, steps
from .options import JsonOption, RepoOption
from .row_output import ALL, parse_limit, print_query_rows

app = typer.Typer(no_args_is_help=True, help="NiFi-style provenance repository (DuckDB SQL).")
MAX_ID = 2**63 - 1  # event ids are BIGINT
MAX_EVENTS = 2**31 - 1  # NiFi's getEvents takes an int maxRecords
#: Events `provenance events` prints for a person when no --max is given.
DISPLAY_EVENTS = 100


def _open(ctx: typer.Context, repo: str | None, *, recover: bool = False) -> ProvenanceRepository:
    # Read commands do not recover (no writes); write commands finish pending rollovers first.
    settings = cli_context(ctx).provenance_settings()
    return ProvenanceRepository.open(open_store(repo), settings, recover=recover)


def _print_events(events: list[ProvenanceEvent], as_json: bool, caption: str | None = None) -> None:
    if as_json:
        emit_json([e.to_dict() for e in events])
        return
    table = RichTable(
        "event_id",
        "event_time",
        "event_type",
        "flowfile_uuid",
        "component_id",
        "size",
        "details",
        caption=caption,
    )
    for e in events:
        when = ms_to_iso(e.event_time)
        table.add_row(
            str(e.event_id),
            when,
            e.event_type,
            e.flowfile_uuid,
            e.component_id,
            str(e.file_size),
            e.details or "",
        )
    Console().print(table)


@app.command()
def ingest(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="JSON lines or NiFi export")
    ],
    repo: RepoOption = None,
    json_out: JsonOption = False,
    fmt: Annotated[
        str, typer.Option("--format", help="events (ours or NiFi's) or openlineage (RunEvents)")
    ] = "events",
) -> None:
    """Register the events of FILE (ours: JSON lines with the view's column names; or NiFi's
    site-to-site provenance JSON). All or nothing: every line is type-checked and validated
    before anything is written, then all events become visible at once. Re-ingesting a NiFi
    export (same eventIds) is refused. `--format openlineage`: OpenLineage RunEvents
    (docs/spark.md, "Provenance")."""
    if fmt == "openlineage":
        _ingest_openlineage(ctx, file, repo, json_out)
        return
    if fmt != "events":
        raise typer.BadParameter("--format must be events or openlineage")
    repo_ = _open(ctx, repo, recover=True)
    try:
        with reading(file, f"ingest {file.name}", quiet=json_out):
            r = ingest_file(repo_, file)
    finally:
        repo_.close()
    result = {
        "events": r.events,
        "first_event_id": r.first_event_id,
        "last_event_id": r.last_event_id,
    }
    if json_out:
        emit_json(result)
    else:
        ids = f" (ids {r.first_event_id}..{r.last_event_id})" if r.events else ""
        print(f"registered {r.events} events{ids}")


def _ingest_openlineage(ctx: typer.Context, file: Path, repo: str | None, json_out: bool) -> None:
    from provenance.openlineage import ingest as ingest_openlineage

    repo_ = _open(ctx, repo, recover=True)
    try:
        with (
            reading(file, f"ingest {file.name}", quiet=json_out),
            open(file, encoding="utf-8") as fh,
        ):
            r = ingest_openlineage(repo_, fh)
    finally:
        repo_.close()
    if json_out:
        emit_json(dataclasses.asdict(r))
    else:
        print(
            f"registered {r.events} events from {r.recorded} runs "
            f"({r.already_recorded} recorded before), "
            f"{r.run_events} RunEvents read, {r.skipped} without provenance"
        )


@app.command()
def sql(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="One SELECT over the view `provenance`")],
    repo: RepoOption = None,
    json_out: JsonOption = False,
) -> None:
    """Run a read-only SQL query over the view `provenance` (DuckDB)."""
    repo_ = _open(ctx, repo)
    try:
        names, rows = repo_.sql(query)
    finally:
        repo_.close()
    print_query_rows(names, rows, json_out)


@app.command()
def events(
    ctx: typer.Context,
    first: Annotated[int, typer.Option("--first", min=0, max=MAX_ID, help="First event id")] = 0,
    max_events: Annotated[
        str | None,
        typer.Option(
            "--max",
            metavar="N|all",
            help=f"At most this many events ({ALL!r}: no limit); default: "
            f"{DISPLAY_EVENTS} printed, all in --json",
        ),
    ] = None,
    repo: RepoOption = None,
    json_out: JsonOption = False,
) -> None:
    """Events with id >= FIRST in id order (NiFi's getEvents)."""
    wanted = parse_limit(max_events, "--max", json_out, display=DISPLAY_EVENTS, minimum=1)
    limit = MAX_EVENTS if wanted is None else min(wanted, MAX_EVENTS)
    repo_ = _open(ctx, repo)
    try:
        # One more than shown: a person is told when more events follow.
        found = repo_.get_events(first, limit if json_out else min(limit + 1, MAX_EVENTS))
    finally:
        repo_.close()
    caption = None
    if len(found) > limit:
        found = found[:limit]
        caption = (
            f"showing {limit} events from id {first}; more follow "
            f"(--first {found[-1].event_id + 1}, --max N or --max {ALL})"
        )
    _print_events(found, json_out, caption)


@app.command()
def lineage(
    ctx: typer.Context,
    uuid: Annotated[str, typer.Argument(help="FlowFile UUID")],
    fmt: Annotated[str, typer.Option("--format", help="json, dot or svg")] = "json",
    repo: RepoOption = None,
    json_out: JsonOption = False,
) -> None:
    """The lineage graph of a FlowFile (NiFi's algorithm) as JSON, Graphviz DOT or SVG."""
    if json_out:
        fmt = "json"
    if fmt not in ("json", "dot", "svg"):
        raise typer.BadParameter("--format must be json, dot or svg")
    repo_ = _open(ctx, repo)
    try:
        graph = repo_.lineage(uuid)
    finally:
        repo_.close()
    if json_out:
        emit_json(graph.to_json())
    elif fmt == "json":
        print(json.dumps(graph.to_json(), indent=2))  # --format json: for a person to read
    else:
        sys.stdout.write(to_dot(graph) if fmt == "dot" else to_svg(graph))


@app.command()
def replay(
    ctx: typer.Context,
    event_id: Annotated[int, typer.Argument(min=0, max=MAX_ID, help="Event to replay")],
    repo: RepoOption = None,
    json_out: JsonOption = False,
) -> None:
    """Re-emit the content an event saw as a new FlowFile and record a REPLAY event."""
    from provenance.replay import replay as do_replay

    repo_ = _open(ctx, repo, recover=True)
    try:
        result = do_replay(repo_, event_id)
    finally:
        repo_.close()
    if json_out:
        emit_json(result.to_json())
    else:
        print(result.describe())


@app.command()
def rollover(
    ctx: typer.Context,
    repo: RepoOption = None,
    json_out: JsonOption = False,
    engine: Annotated[str, typer.Option(help="local (pyarrow) or spark (a PySpark job)")] = "local",
) -> None:
    """Merge every unmerged journal into Parquet files committed on the timeline."""
    repo_ = _open(ctx, repo, recover=False)
    spark = None
    try:
        if engine == "spark":
            spark = _local_spark()
        with steps("rollover", "journals", quiet=json_out) as bar:
            r = repo_.rollover(engine=engine, spark=spark, progress=bar.callback)
    finally:
        repo_.close()
        if spark is not None:
            spark.stop()
    if json_out:
        emit_json(
            {
                "events": r.events,
                "journals": r.journals,
                "files": r.files,
                "bytes_in": r.bytes_in,
                "bytes_out": r.bytes_out,
                "seconds": r.seconds,
                # Same names as ingest's: inclusive ids (the rollover's end_id is exclusive).
                "first_event_id": r.first_id if r.events else None,
                "last_event_id": r.end_id - 1 if r.events else None,
            }
        )
    else:
        print(
            f"rolled over {r.events} events from {r.journals} journals into {r.files} "
            f"files ({r.bytes_in} -> {r.bytes_out} bytes) in {r.seconds:.2f}s"
        )


@app.command("accept-missing")
def accept_missing(
    ctx: typer.Context,
    first: Annotated[int, typer.Argument(min=0, max=MAX_ID, help="First missing event id")],
    end: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="Id after the last missing one")],
    repo: RepoOption = None,
) -> None:
    """Accept the loss of events FIRST..END-1 that an error reported as missing (a deleted
    journal or ingest manifest no backup will restore): rollover then skips the hole."""
    repo_ = _open(ctx, repo, recover=False)  # recovery would stop at the hole
    try:
        repo_.accept_missing(first, end)
    finally:
        repo_.close()
    print(f"events {first}..{end - 1} recorded as lost; the next rollover skips them")


def _local_spark() -> Any:
    """A local SparkSession whose Python workers run this interpreter (flowledger's venv)."""
    import os

    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise ValueError("--engine spark needs PySpark: pip install 'flowledger[spark]'") from exc
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = SparkSession.builder.master("local[*]").appName("flowledger-rollover").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@app.command()
def expire(
    ctx: typer.Context,
    repo: RepoOption = None,
    json_out: JsonOption = False,
    max_storage_time: Annotated[
        float | None,
        typer.Option(min=0, help="Seconds (NiFi's max.storage.time; default 30 days)"),
    ] = None,
    max_storage_size: Annotated[
        int | None, typer.Option(min=0, help="Bytes (NiFi's max.storage.size; default 10 GiB)")
    ] = None,
) -> None:
    """Expire the oldest files by max_storage_size and max_storage_time (replacecommit + clean)."""
    settings = cli_context(ctx).provenance_settings()
    if max_storage_time is not None:
        settings = dataclasses.replace(settings, max_storage_time_s=max_storage_time)
    if max_storage_size is not None:
        settings = dataclasses.replace(settings, max_storage_size=max_storage_size)
    repo_ = ProvenanceRepository.open(open_store(repo), settings, recover=False)
    try:
        with steps("expire", "files", quiet=json_out) as bar:
            plan = repo_.expire(progress=bar.callback)
    finally:
        repo_.close()
    result = {
        "files": len(plan.files),
        "events": plan.events,
        "bytes": plan.bytes,
        "by_size": len(plan.by_size),
        "by_age": len(plan.by_age),
    }
    if json_out:
        emit_json(result)
    else:
        print(
            f"expired {result['files']} files ({result['events']} events, {result['bytes']} bytes)"
        )
