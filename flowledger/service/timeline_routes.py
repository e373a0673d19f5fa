"""Timelines of the repository's tables, by *name*: `<repo>/tables/<name>` and nothing else."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from flowledger.commands.archive_cmds import archived_rows
from flowledger.commands.timeline import describe
from timeline import Table

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
