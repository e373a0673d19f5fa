"""From a row of a keyed table to its provenance: the record's key -> the commit that last
wrote it (the row's `_flowledger_commit_time`, found through the table's index:
`timeline.keyed.lookup_keys`) -> the file slices that commit wrote (their
SEND events, found by the commit's marker), so the page opens the lineage of the slice that
holds the row and walks back to the raw inputs."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc
from fastapi import APIRouter, Depends, Query

from provenance import ProvenanceEvent, SearchTerm
from provenance import Query as ProvQuery
from timeline import Table
from timeline.keyed import COMMIT_TIME_COL, lookup_keys

from ..uris import canonical, commit_marker
from .dto import event_dto
from .errors import InvalidRequest, ServiceNotFound
from .state import Services, services
from .timeline_routes import named_table

router = APIRouter(tags=["timeline"])
#: The SEND events of one commit that one lookup reads (one per file slice it wrote).
MAX_SLICES = 1000


def _commit_time(table: Table, name: str, key: str) -> str:
    """The commit that last wrote the record `key`: its row's `_flowledger_commit_time`,
    read through the table's index (only the file slices that may hold the key are read;
    with partition-scoped keys, the latest of its partitions' rows)."""
    if table.properties is None:
        raise InvalidRequest(
            f"table {name!r} is not keyed: its rows have no record key to look up "
            f"(query it with POST /tables/{name}/sql)"
        )
    found = lookup_keys(table, [key], columns=[COMMIT_TIME_COL])
    if not found.num_rows:
        raise ServiceNotFound(f"no record with key {key!r} in table {name!r}")
    return str(pc.max(found.column(COMMIT_TIME_COL)).as_py())


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
    instant = _commit_time(table, name, key)
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
    # Blocking reads of the object store (the index, then the slices it names): on the SQL
    # threads, within their limits, as every read of a table's rows.
    return await svc.sql.slots.run(_lookup, svc, name, key)
