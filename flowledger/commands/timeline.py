"""`flowledger timeline ...`: show a table's timeline, roll back, savepoint, restore, clean."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

from storage import open_store
from timeline import KEEP_LATEST_COMMITS, TIMELINE, Instant, Table, TableSettings

from ..context import cli_context
from ..errors import MissingArgument, NoSuchTable
from ..output import emit_json, instant_json
from . import archive_cmds
from .options import JsonOption, TableOption

app = typer.Typer(no_args_is_help=True, help="Hudi-style timeline of a table.")


def open_table(ctx: typer.Context, uri: str | None, settings: TableSettings | None = None) -> Table:
    """The table at `uri`, opened with `settings` (default: the invocation's)."""
    if not uri:
        raise MissingArgument(
            "no table given: pass --table URI (e.g. ./flowledger-data/tables/t1) or set "
            "FLOWLEDGER_TABLE"
        )
    store = open_store(uri)
    # Reading or changing a table that was never written is a mistake (a typo in the URI):
    # say so instead of showing an empty table, and create nothing (one short LIST).
    if not store.list_page(TIMELINE, max_keys=1).objects:
        raise NoSuchTable(f"no table at {store.uri}: nothing was ever written there")
    return Table.open(store, settings or cli_context(ctx).table_settings())


def describe(table: Table) -> list[dict[str, Any]]:
    """One row per instant: time, action, state, completion order, files and rows written."""
    timeline = table.timeline()
    rows = []
    for i in timeline:
        row: dict[str, Any] = instant_json(i)
        if i.is_completed:
            row.update(archive_cmds.entry_summary(table.tl.entry_of(i)))
        rows.append(row)
    return rows


def _print(done: Instant, what: str, as_json: bool) -> None:
    if as_json:
        emit_json(instant_json(done))
    else:
        print(f"{what}: {done}")


@app.command()
def show(
    ctx: typer.Context,
    table: TableOption = None,
    as_json: JsonOption = False,
    archived: Annotated[
        bool, typer.Option("--archived", help="Include the archived timeline")
    ] = False,
) -> None:
    """Every instant of the active timeline, in instant-time order."""
    if archived:
        archive_cmds.show_archived(ctx, table, as_json)
        return
    t = open_table(ctx, table)
    rows = describe(t)
    if as_json:
        emit_json(rows)
        return
    out = RichTable(title=t.uri)
    out.add_column("instant time", no_wrap=True, min_width=17)
    for name in ("action", "state", "completion", "operation", "files", "rows"):
        out.add_column(name)
    for r in rows:
        files = r.get("files_added", r.get("files_deleted", ""))
        if r.get("log_files"):
            files = f"{files} + {r['log_files']} log"
        out.add_row(
            r["instant_time"],
            r["action"],
            r["state"],
            "" if r["completion_order"] is None else str(r["completion_order"]),
            str(r.get("operation", r.get("target", ""))),
            str(files),
            str(r.get("rows", "")),
        )
    Console().print(out)


@app.command()
def rollback(
    ctx: typer.Context,
    instant: Annotated[str, typer.Argument(help="Instant time to roll back")],
    table: TableOption = None,
    as_json: JsonOption = False,
) -> None:
    """Roll back a pending write or the latest completed commit."""
    _print(open_table(ctx, table).maintenance.rollback(instant), "rolled back by", as_json)


@app.command()
def savepoint(
    ctx: typer.Context,
    instant: Annotated[str, typer.Argument(help="Completed commit to savepoint")],
    table: TableOption = None,
    as_json: JsonOption = False,
) -> None:
    """Keep the table as of INSTANT restorable (the cleaner leaves its files alone)."""
    _print(open_table(ctx, table).maintenance.savepoint(instant), "savepoint", as_json)


@app.command()
def restore(
    ctx: typer.Context,
    instant: Annotated[str, typer.Argument(help="Savepointed instant to restore to")],
    table: TableOption = None,
    as_json: JsonOption = False,
) -> None:
    """Restore the table to a savepoint, rolling back every later commit (newest first)."""
    _print(open_table(ctx, table).maintenance.restore(instant), "restored by", as_json)


@app.command()
def clean(
    ctx: typer.Context,
    table: TableOption = None,
    policy: Annotated[
        str, typer.Option(help="KEEP_LATEST_COMMITS or KEEP_LATEST_FILE_VERSIONS")
    ] = KEEP_LATEST_COMMITS,
    retained: Annotated[int | None, typer.Option(help="Commits (or file versions) to keep")] = None,
    as_json: JsonOption = False,
) -> None:
    """Delete files that no retained snapshot (or savepoint) reads."""
    done = open_table(ctx, table).maintenance.clean(policy, retained)
    if done is None:
        if as_json:
            emit_json(None)
        else:
            print("nothing to clean")
    else:
        _print(done, "cleaned by", as_json)


@app.command()
def compact(
    ctx: typer.Context,
    table: TableOption = None,
    schedule_only: Annotated[
        bool, typer.Option("--schedule-only", help="Only write the plan (compaction.requested)")
    ] = False,
    instant: Annotated[
        str | None, typer.Option("--instant", help="Execute this scheduled compaction")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Merge-on-read tables: execute pending compactions nobody is running (scheduled ones,
    and crashed ones whose heartbeat expired), else plan and execute a new one."""
    t = open_table(ctx, table)
    if schedule_only:
        planned = t.maintenance.schedule_compaction()
        if as_json:
            emit_json({"scheduled": planned})
        else:
            print(f"scheduled compaction {planned}" if planned else "nothing to compact")
        return
    ran = t.maintenance.run_compaction(instant)
    if not ran and instant is None:
        done = t.maintenance.compact()
        ran = [done.time] if done is not None else []
    if as_json:
        emit_json({"compacted": ran})
    else:
        print("\n".join(f"compacted {r}" for r in ran) if ran else "nothing to compact")


@app.command()
def index(ctx: typer.Context, table: TableOption = None, as_json: JsonOption = False) -> None:
    """Build the record-level index of a keyed table (the `indexing` action), or merge its
    deltas into new shards; resumes an interrupted run."""
    from timeline.keyed import build_index

    _print(build_index(open_table(ctx, table)), "indexed by", as_json)


@app.command()
def recover(ctx: typer.Context, table: TableOption = None) -> None:
    """Roll back failed writes (expired heartbeats) and finish interrupted table services."""
    for line in open_table(ctx, table).maintenance.recover() or ["nothing to recover"]:
        print(line)


app.command("archive")(archive_cmds.archive)
