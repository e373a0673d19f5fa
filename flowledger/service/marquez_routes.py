"""Marquez's read API (`/api/v1/...`) over the runs flowledger records, so Marquez's client
(`marquez-python`) and web UI browse the lineage OpenLineage producers sent and the lineage of
flowledger's own jobs: namespaces, jobs, their runs, datasets and the lineage graph, in
Marquez's JSON shapes. Read-only: the write side is OpenLineage's `POST /api/v1/lineage`."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, Query
from starlette.concurrency import run_in_threadpool

from ..marquez_catalog import Catalog, Name, Run
from .errors import InvalidRequest
from .errors import ServiceNotFound as NotFound
from .state import Services, services

router = APIRouter(prefix="/api/v1", tags=["marquez"])


def _iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _id(n: Name) -> dict[str, str]:
    return {"namespace": n.namespace, "name": n.name}


def _node_id(kind: str, n: Name) -> str:
    return f"{kind}:{n.namespace}:{n.name}"


def run_json(r: Run) -> dict[str, Any]:
    return {
        "id": r.id,
        "createdAt": _iso(r.started_ms),
        "updatedAt": _iso(r.ended_ms),
        "nominalStartTime": None,
        "nominalEndTime": None,
        "state": "FAILED" if r.failed else "COMPLETED",
        "startedAt": _iso(r.started_ms),
        "endedAt": _iso(r.ended_ms),
        "durationMs": r.ended_ms - r.started_ms,
        "args": {},
        "jobVersion": {**_id(r.job), "version": r.id},
        "inputDatasetVersions": [
            {"datasetVersionId": {**_id(d), "version": r.id}, "facets": {}} for d in r.inputs
        ],
        "outputDatasetVersions": [
            {"datasetVersionId": {**_id(d), "version": r.id}, "facets": {}} for d in r.outputs
        ],
        "context": {},
        "facets": {"flowledger": {"marker": r.marker, "details": r.details}},
    }


def job_json(name: Name, runs: list[Run]) -> dict[str, Any]:
    latest = runs[-1]
    inputs = dict.fromkeys(d for r in runs for d in r.inputs)
    outputs = dict.fromkeys(d for r in runs for d in r.outputs)
    return {
        "id": _id(name),
        "type": "BATCH",
        "name": name.name,
        "simpleName": name.name,
        "parentJobName": None,
        "createdAt": _iso(runs[0].started_ms),
        "updatedAt": _iso(latest.ended_ms),
        "namespace": name.namespace,
        "inputs": [_id(d) for d in inputs],
        "outputs": [_id(d) for d in outputs],
        "location": None,
        "description": latest.details or None,
        "latestRun": run_json(latest),
        "latestRuns": [run_json(r) for r in reversed(runs[-10:])],
        "facets": {},
        "currentVersion": latest.id,
        "labels": [],
        "tags": [],
    }


def dataset_json(name: Name, runs: list[Run]) -> dict[str, Any]:
    return {
        "id": _id(name),
        "type": "DB_TABLE",
        "name": name.name,
        "physicalName": name.name,
        "createdAt": _iso(runs[0].started_ms),
        "updatedAt": _iso(runs[-1].ended_ms),
        "namespace": name.namespace,
        "sourceName": name.namespace,
        "fields": [],
        "tags": [],
        "lastModifiedAt": next(
            (_iso(r.ended_ms) for r in reversed(runs) if name in r.outputs), None
        ),
        "lastLifecycleState": None,
        "description": None,
        "currentVersion": runs[-1].id,
        "columnLineage": None,
        "facets": {},
        "deleted": False,
    }


def namespace_json(name: str, first_ms: int) -> dict[str, Any]:
    return {
        "name": name,
        "createdAt": _iso(first_ms),
        "updatedAt": _iso(first_ms),
        "ownerName": "flowledger",
        "description": None,
        "isHidden": False,
    }


def _page(items: list[Any], limit: int, offset: int) -> list[Any]:
    return items[offset : offset + limit]


Limit = Query(100, ge=1, le=10_000)
Offset = Query(0, ge=0)


async def _catalog(svc: Services = Depends(services)) -> Catalog:  # noqa: B008
    return await run_in_threadpool(svc.marquez.get, svc.prov)


@router.get("/namespaces")
async def namespaces(
    limit: int = Limit,
    offset: int = Offset,
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:
    found = sorted(cat.namespaces().items())
    return {"namespaces": [namespace_json(n, t) for n, t in _page(found, limit, offset)],
            "totalCount": len(found)}  # fmt: skip


@router.get("/namespaces/{namespace:path}/jobs/{job:path}/runs")
async def job_runs(
    namespace: str, job: str, limit: int = Limit, offset: int = Offset,
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:  # fmt: skip
    runs = cat.jobs().get(Name(namespace, job))
    if runs is None:
        raise NotFound(f"no job {job!r} in namespace {namespace!r}")
    newest = list(reversed(runs))
    return {"runs": [run_json(r) for r in _page(newest, limit, offset)], "totalCount": len(runs)}


@router.get("/namespaces/{namespace:path}/jobs/{job:path}")
async def get_job(namespace: str, job: str, cat: Catalog = Depends(_catalog)) -> dict[str, Any]:  # noqa: B008
    runs = cat.jobs().get(Name(namespace, job))
    if runs is None:
        raise NotFound(f"no job {job!r} in namespace {namespace!r}")
    return job_json(Name(namespace, job), runs)


@router.get("/namespaces/{namespace:path}/jobs")
async def list_jobs(
    namespace: str, limit: int = Limit, offset: int = Offset,
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:  # fmt: skip
    found = sorted((n, r) for n, r in cat.jobs().items() if n.namespace == namespace)
    return {"jobs": [job_json(n, r) for n, r in _page(found, limit, offset)],
            "totalCount": len(found)}  # fmt: skip


@router.get("/namespaces/{namespace:path}/datasets/{dataset:path}")
async def get_dataset(
    namespace: str,
    dataset: str,
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:
    runs = cat.datasets().get(Name(namespace, dataset))
    if runs is None:
        raise NotFound(f"no dataset {dataset!r} in namespace {namespace!r}")
    return dataset_json(Name(namespace, dataset), runs)


@router.get("/namespaces/{namespace:path}/datasets")
async def list_datasets(
    namespace: str, limit: int = Limit, offset: int = Offset,
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:  # fmt: skip
    found = sorted((n, r) for n, r in cat.datasets().items() if n.namespace == namespace)
    return {"datasets": [dataset_json(n, r) for n, r in _page(found, limit, offset)],
            "totalCount": len(found)}  # fmt: skip


@router.get("/namespaces/{namespace:path}")
async def get_namespace(namespace: str, cat: Catalog = Depends(_catalog)) -> dict[str, Any]:  # noqa: B008
    first = cat.namespaces().get(namespace)
    if first is None:
        raise NotFound(f"no namespace {namespace!r}")
    return namespace_json(namespace, first)


@router.get("/jobs")
async def all_jobs(
    limit: int = Limit,
    offset: int = Offset,
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:
    """Every job of every namespace (the web UI's jobs page)."""
    found = sorted(cat.jobs().items())
    return {"jobs": [job_json(n, r) for n, r in _page(found, limit, offset)],
            "totalCount": len(found)}  # fmt: skip


@router.get("/search")
async def search(
    q: str = Query(..., min_length=1),
    filter_: str | None = Query(None, alias="filter", pattern="^(DATASET|JOB)$"),
    sort: str = Query("NAME", pattern="^(NAME|UPDATE_AT)$"),
    limit: int = Limit,
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:
    """Jobs and datasets whose name holds `q` (case-insensitive), as Marquez's search box."""
    hits: list[dict[str, Any]] = []
    for kind, found in (("JOB", cat.jobs()), ("DATASET", cat.datasets())):
        if filter_ not in (None, kind):
            continue
        for name, runs in found.items():
            if q.lower() in name.name.lower():
                node = _node_id(kind.lower(), name)
                updated = _iso(runs[-1].ended_ms)
                hits.append({"type": kind, "name": name.name, "updatedAt": updated,
                             "namespace": name.namespace, "nodeId": node})  # fmt: skip
    key = "updatedAt" if sort == "UPDATE_AT" else "name"
    hits.sort(key=lambda h: h[key], reverse=sort == "UPDATE_AT")
    return {"totalCount": len(hits), "results": hits[:limit]}


@router.get("/jobs/runs/{run_id}")
@router.get("/runs/{run_id}")
async def get_run(run_id: str, cat: Catalog = Depends(_catalog)) -> dict[str, Any]:  # noqa: B008
    run = cat.run(run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r}")
    return run_json(run)


def lineage_graph(cat: Catalog, node_id: str, depth: int) -> dict[str, Any]:
    """Marquez's lineage graph: the jobs and datasets within `depth` runs of `node_id`,
    upstream and downstream, each with its edges (dataset -> job -> dataset)."""
    jobs, datasets = cat.jobs(), cat.datasets()
    edges: dict[str, set[tuple[str, str]]] = {}
    data: dict[str, dict[str, Any]] = {}
    for name, runs in jobs.items():
        jid = _node_id("job", name)
        data[jid] = {**job_json(name, runs), "type": "JOB"}
        for r in runs:
            for d in r.inputs:
                edges.setdefault(jid, set()).add((_node_id("dataset", d), jid))
                edges.setdefault(_node_id("dataset", d), set()).add((_node_id("dataset", d), jid))
            for d in r.outputs:
                edges.setdefault(jid, set()).add((jid, _node_id("dataset", d)))
                edges.setdefault(_node_id("dataset", d), set()).add((jid, _node_id("dataset", d)))
    for name, runs in datasets.items():
        data[_node_id("dataset", name)] = {**dataset_json(name, runs), "type": "DATASET"}
    if node_id not in data:
        raise NotFound(f"no node {node_id!r} (job:NAMESPACE:NAME or dataset:NAMESPACE:NAME)")
    seen = {node_id: 0}
    todo = deque([node_id])
    while todo:
        at = todo.popleft()
        if seen[at] >= depth * 2:  # one level of depth is a job and its datasets
            continue
        for origin, dest in edges.get(at, ()):
            for nxt in (origin, dest):
                if nxt not in seen:
                    seen[nxt] = seen[at] + 1
                    todo.append(nxt)
    graph = []
    for nid in seen:
        mine = edges.get(nid, set())
        graph.append({
            "id": nid,
            "type": data[nid]["type"],
            "data": data[nid],
            "inEdges": [{"origin": o, "destination": d} for o, d in sorted(mine) if d == nid],
            "outEdges": [{"origin": o, "destination": d} for o, d in sorted(mine) if o == nid],
        })  # fmt: skip
    return {"graph": graph}


@router.get("/lineage")
async def get_lineage(
    node_id: str = Query(..., alias="nodeId"),
    depth: int = Query(20, ge=0, le=1000),
    cat: Catalog = Depends(_catalog),  # noqa: B008
) -> dict[str, Any]:
    """The lineage graph around `nodeId` (`job:NAMESPACE:NAME`, `dataset:NAMESPACE:NAME`)."""
    if not node_id.startswith(("job:", "dataset:")):
        raise InvalidRequest("nodeId is job:NAMESPACE:NAME or dataset:NAMESPACE:NAME")
    return await run_in_threadpool(lineage_graph, cat, node_id, depth)
