"""From a row of a keyed table to its provenance: the record's key -> the commit that last
wrote it (the row's `_flowledger_commit_time`) -> the file slices that commit wrote (their
SEND events, found by the commit's marker), so the page opens the lineage of the slice that
holds the row and walks back to the raw inputs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from provenance import ProvenanceEvent, SearchTerm
from provenance import Query as ProvQuery
from timeline import Table
from timeline.keyed import COMMIT_TIME_COL, RECORD_KEY_COL

from ..table_sql import TableRead, connect
from ..uris import canonical, commit_marker
from .dto import event_dto
from .errors import ServiceNotFound
from .state import Services, services
from .timeline_routes import named_table

router = APIRouter(tags=["timeline"])
#: The SEND events of one commit that one lookup reads (one per file slice it wrote).
MAX_SLICES = 1000


def _commit_time(svc: Services, table: Table, name: str, key: str) -> str:
    memory = svc.settings.sql_memory_limit
    con = connect(svc.prov, table, TableRead(), name, svc.sql.temp_dir, memory)
    try:
        found = con.execute(
            f'SELECT "{COMMIT_TIME_COL}" FROM t WHERE "{RECORD_KEY_COL}" = ? LIMIT 1', [key]
        ).fetchall()
    finally:
        con.close()
    if not found:
        raise ServiceNotFound(f"no record with key {key!r} in table {name!r}")
    return str(found[0][0])


def _holds(table: Table, instant: str, key: str) -> dict[str, bool]:
    """Per file the commit wrote: whether its recorded key range may hold `key` (a file
    without a range may hold any key)."""
    entry = table.entry(instant)
    out: dict[str, bool] = {}
    stats = [
        *entry.metadata.get("write_stats", ()),
        *(
            {**lf.get("key_stats", {}), "path": lf["path"]}
            for lf in entry.metadata.get("log_files", ())
        ),
    ]
    for st in stats:
        lo, hi = st.get("min_key"), st.get("max_key")
        inside = True
        if lo is not None and hi is not None:
            probe: Any = int(key) if isinstance(lo, int) and key.lstrip("-").isdigit() else key
            try:
                inside = lo <= probe <= hi
            except TypeError:
                inside = True
        out[canonical(table.store.url(str(st["path"])))] = inside
    return out


def _lookup(svc: Services, name: str, key: str) -> dict[str, Any]:
    table = named_table(svc, name)
    instant = _commit_time(svc, table, name, key)
    marker = commit_marker(table.uri, instant)
    term = SearchTerm("alternate_identifier_uri", marker)
    found = svc.prov.query(ProvQuery((term,), max_results=MAX_SLICES * 4))
    sends = [e for e in found if e.event_type == "SEND" and e.alternate_identifier_uri == marker]
    holds = _holds(table, instant, key)

    def rank(e: ProvenanceEvent) -> tuple[int, int]:
        return (0 if holds.get(canonical(e.transit_uri or ""), True) else 1, e.event_id)

    sends.sort(key=rank)
    return {
        "table": name,
        "key": key,
        "commitTime": instant,
        "marker": marker,
        "slices": [
            {
                **event_dto(e, summarize=True),
                "mayHoldKey": holds.get(canonical(e.transit_uri or ""), True),
            }
            for e in sends
        ],
    }


@router.get("/tables/{name}/records")
async def record_provenance(
    name: str,
    key: str = Query(..., min_length=1, max_length=4096, description="the record key"),
    svc: Services = Depends(services),  # noqa: B008
) -> dict[str, Any]:
    """The commit that last wrote the record `key` of table `name` and the file slices it
    wrote (SEND events, the one whose key range holds the key first): the start of the
    record's lineage back to the raw inputs."""
    # A table scan, as `POST /tables/{name}/sql`: on the SQL threads, within their limits.
    return await svc.sql.slots.run(_lookup, svc, name, key)
