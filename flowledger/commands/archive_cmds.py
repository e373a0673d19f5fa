"""`flowledger timeline show --archived` and `flowledger timeline archive`: the
archived history and the archiver that keeps the active timeline short.

Plain functions with typer annotations; `commands/timeline.py` registers them."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

from storage import open_store
from timeline import WRITE_ACTIONS, Entry, Table
from timeline.archive import (
    ArchivalSettings,
    ArchivedTimeline,
    Archiver,
    load_active,
    manifest_of,
    read_manifest,
)

from ..context import cli_context
from ..errors import MissingArgument
from ..output import emit_json, instant_json
from ..progress import steps
from .options import JsonOption, TableOption

_DEFAULTS = ArchivalSettings()


def _open(ctx: typer.Context, uri: str | None) -> Table:
    if not uri:
        raise MissingArgument(
            "no table given: pass --table URI (e.g. ./flowledger-data/tables/t1) or set "
            "FLOWLEDGER_TABLE"
        )
    return Table(open_store(uri), cli_context(ctx).table_settings())


def entry_summary(e: Entry) -> dict[str, Any]:
    """What a completed instant wrote (files and rows; a delta commit's rows are in its log
    files) or deleted, for the timeline listings of the CLI and the service."""
    if e.action in WRITE_ACTIONS:
        logs = e.metadata.get("log_files", ())
        out: dict[str, Any] = {
            "operation": e.metadata.get("operation", ""),
            "files_added": len(e.added),
            "files_replaced": len(e.replaced),
            "rows": sum(f.rows for f in e.added) + sum(int(lf["rows"]) for lf in logs),
        }
        if logs:
            out["log_files"] = len(logs)
        return out
    if e.action not in ("clean", "rollback", "restore"):
        return {}
    out = {"files_deleted": len(e.deleted)}
    if e.target:
        out["target"] = e.target
    return out


def archived_rows(
    table: Table, start: str | None = None, end: str | None = None
) -> list[dict[str, Any]]:
    """Archived instants then the active ones, each row saying where it lives."""
    view = load_active(table.tl)
    reader = ArchivedTimeline(table.store, manifest_of(view))
    rows: list[dict[str, Any]] = []
    for r in reader.records(start, end, with_bodies=True):
        row = {
            "instant_time": r.time,
            "action": r.action,
            "state": r.state,
            "completion_order": r.seq,
            "timeline": "archived",
        }
        rows.append({**row, **entry_summary(r.entry(table.store.url()))})
    for i in view.timeline:
        if (start and i.time < start) or (end and i.time > end):
            continue
        row = {**instant_json(i), "timeline": "active"}
        if i.is_completed:
            row.update(entry_summary(table.tl.entry_of(i)))
        rows.append(row)
    return rows


def show_archived(
    ctx: typer.Context,
    table: str | None,
    as_json: bool,
    start: str | None = None,
    end: str | None = None,
) -> None:
    """Every instant, archived ones first (lazy: only archive files overlapping the range)."""
    t = _open(ctx, table)
    rows = archived_rows(t, start, end)
    if as_json:
        emit_json(rows)
        return
    out = RichTable(title=f"{t.uri} (archived + active)")
    out.add_column("instant time", no_wrap=True, min_width=17)
    for name in ("action", "state", "completion", "timeline", "operation", "files", "rows"):
        out.add_column(name)
    for r in rows:
        out.add_row(
            r["instant_time"],
            r["action"],
            r["state"],
            "" if r["completion_order"] is None else str(r["completion_order"]),
            r["timeline"],
            str(r.get("operation", r.get("target", ""))),
            str(r.get("files_added", r.get("files_deleted", ""))),
            str(r.get("rows", "")),
        )
    Console().print(out)


def archive(
    ctx: typer.Context,
    table: TableOption = None,
    keep_min_commits: Annotated[
        int, typer.Option(help="hoodie.keep.min.commits")
    ] = _DEFAULTS.keep_min_commits,
    keep_max_commits: Annotated[
        int, typer.Option(help="hoodie.keep.max.commits")
    ] = _DEFAULTS.keep_max_commits,
    beyond_savepoint: Annotated[
        bool, typer.Option(help="hoodie.archive.beyond.savepoint")
    ] = _DEFAULTS.archive_beyond_savepoint,
    merge: Annotated[
        bool, typer.Option(help="Merge small archive files afterwards")
    ] = _DEFAULTS.archive_merge_enable,
    dry_run: Annotated[bool, typer.Option(help="Only show what would be archived")] = False,
    as_json: JsonOption = False,
) -> None:
    """Archive old instants into an Avro archive file (Hudi's archival), merge small files."""
    t = _open(ctx, table)
    settings = ArchivalSettings(
        keep_min_commits=keep_min_commits,
        keep_max_commits=keep_max_commits,
        archive_beyond_savepoint=beyond_savepoint,
        archive_merge_enable=merge,
    )
    archiver = Archiver(t, settings)
    if dry_run:
        plan = archiver.plan()
        names = [i.name for i in plan.instants]
        if as_json:
            emit_json({"would_archive": names, "stopped_by": plan.limit_reason})
        else:
            print(f"would archive {len(names)} instants (stopped by: {plan.limit_reason or '-'})")
            for n in names:
                print(f"  {n}")
        return
    # two steps per archived instant: read into the archive file, removed from the active
    with steps(f"archive {t.uri}", "steps", quiet=as_json) as bar:
        result = archiver.run(sweep=True, progress=bar.callback)
    m = read_manifest(t.store)
    out = {
        "archived": [i.name for i in result.archived],
        "archive_file": t.store.url(result.file) if result.file else None,
        "merged_into": t.store.url(result.merged) if result.merged else None,
        "recovered": list(result.recovered),
        "stopped_by": result.limit_reason,
        "archive_files": len(m.files),
        "archived_instants": m.instant_count,
    }
    if as_json:
        emit_json(out)
        return
    for line in result.recovered:
        print(line)
    if result.file:
        print(f"archived {len(result.archived)} instants into {out['archive_file']}")
    else:
        print(f"nothing to archive (stopped by: {result.limit_reason or 'keep_max_commits'})")
    if result.merged:
        print(f"merged small archive files into {out['merged_into']}")
    print(f"archive: {len(m.files)} files, {m.instant_count} instants")
