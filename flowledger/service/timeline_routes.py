"""Timelines of the repository's tables, by *name*: `<repo>/tables/<name>` and nothing else."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from flowledger.commands.archive_cmds import archived_rows
from flowledger.commands.timeline import describe
from timeline import Table, check_table

from ..context import table_settings
from .errors import ServiceNotFound
from .names import checked
from .state import Services, services

router = APIRouter(tags=["timeline"])
TABLES = "tables/"
MAX_TABLES = 500


@router.get("/tables")
def list_tables(svc: Services = Depends(services)) -> list[str]:  # noqa: B008
    """Names of the tables under `<repo>/tables/` (one short LIST per table: skip-scan)."""
    names: list[str] = []
    cursor: str | None = None
    while len(names) < MAX_TABLES:
        page = svc.root.list_page(TABLES, cursor, max_keys=1)
        if not page.objects:
            break
        name = page.objects[0].key[len(TABLES) :].split("/", 1)[0]
        names.append(name)
        cursor = f"{TABLES}{name}/\U0010ffff"  # past every key of this table
    return names


def named_table(svc: Services, name: str) -> Table:
    """The table `<repo>/tables/<name>` (404 when nothing was ever written there)."""
    prefix = f"{TABLES}{checked(name, 'table name')}/"
    if not svc.root.list_page(prefix, None, max_keys=1).objects:
        raise ServiceNotFound(f"no table {name!r} in this repository (looked in {prefix})")
    return Table.open(
        svc.root.scoped(prefix.rstrip("/")), table_settings(svc.settings.auto_archive)
    )


@router.get("/tables/{name}/check")
def table_check(name: str, svc: Services = Depends(services)) -> dict[str, Any]:  # noqa: B008
    """`flowledger table check` of the table `name`: every file a retained snapshot or a
    pending plan reads, pending instants, keys held twice, the record index. 200 with
    `ok: false` and one `problems` entry per problem when the table has any."""
    return check_table(named_table(svc, name)).to_json()


@router.post("/tables/{name}/check/repair")
def table_repair(name: str, svc: Services = Depends(services)) -> dict[str, Any]:  # noqa: B008
    """`flowledger table check --repair`: the check, then the repairs that need no guess;
    `repairs` says what each did or why it was refused, `ok` whether problems are left."""
    return check_table(named_table(svc, name), repair=True).to_json()


@router.get("/tables/{name}/timeline")
def table_timeline(
    name: str,
    archived: bool = Query(False, description="include the archived timeline"),
    svc: Services = Depends(services),  # noqa: B008
) -> dict[str, Any]:
    """Every instant of the table (archived ones first with `archived=true`)."""
    prefix = f"{TABLES}{checked(name, 'table name')}/"
    if not svc.root.list_page(prefix, None, max_keys=1).objects:
        raise ServiceNotFound(f"no table {name!r} in this repository (looked in {prefix})")
    table = Table.open(svc.root.scoped(prefix.rstrip("/")))
    rows = archived_rows(table) if archived else describe(table)
    return {"table": name, "archived": archived, "instants": rows}
