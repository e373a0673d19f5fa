"""Jobs, runs and datasets as Marquez models them, derived from provenance.

Every run that flowledger records as provenance carries one marker in
`alternate_identifier_uri` on all of its events: an OpenLineage run that arrived over
`POST /api/v1/lineage`, a Spark write, a keyed or unkeyed table commit. The events of one
marker are one run; its RECEIVEs are what it read, its SENDs what it wrote, a DROP means it
failed. The job is named as the producer named it (OpenLineage's job namespace and name, the
Spark application's name) or, for flowledger's own commits, by the component that committed
(namespace `flowledger`). A file a table commit wrote is shown as its table (a Marquez
dataset is a table, not one of its files); a table commit that supersedes slices also reads
the table's previous version.

Datasets are named as OpenLineage names them: `s3://bucket` + `path/x`, `file` + `/tmp/x`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from provenance import ProvenanceRepository

#: Component types of the runs this catalog shows (others are NiFi-style processors).
JOB_TYPES = ("OpenLineageRun", "SparkJob", "flowledger.table", "flowledger.pipeline")
#: The namespace of jobs flowledger runs itself.
OWN_NAMESPACE = "flowledger"

_QUERY = f"""
SELECT alternate_identifier_uri, event_type, epoch_ms(event_time), component_id, component_type,
       transit_uri, file_size, details, updated_attributes, flowfile_uuid, parent_uuids
FROM provenance
WHERE alternate_identifier_uri IS NOT NULL
  AND component_type IN ({", ".join(f"'{t}'" for t in JOB_TYPES)})
  AND event_type IN ('RECEIVE', 'SEND', 'JOIN', 'CREATE', 'CONTENT_MODIFIED', 'DROP')
ORDER BY event_id
"""


@dataclass(frozen=True, order=True)
class Name:
    """A job's or a dataset's Marquez identity."""

    namespace: str
    name: str


@dataclass(frozen=True)
class Run:
    """One recorded run of a job."""

    id: str
    job: Name
    started_ms: int
    ended_ms: int
    failed: bool
    inputs: tuple[Name, ...]
    outputs: tuple[Name, ...]
    details: str
    marker: str
    attributes: Mapping[str, str]


@dataclass(frozen=True)
class Catalog:
    """Every run, and the jobs, datasets and namespaces they name."""

    runs: tuple[Run, ...]
    high_water: int = -1  # the last event id the catalog was built from

    def jobs(self) -> dict[Name, list[Run]]:
        out: dict[Name, list[Run]] = {}
        for r in self.runs:
            out.setdefault(r.job, []).append(r)
        return out

    def datasets(self) -> dict[Name, list[Run]]:
        """Each dataset with the runs that read or wrote it."""
        out: dict[Name, list[Run]] = {}
        for r in self.runs:
            for d in (*r.inputs, *r.outputs):
                runs = out.setdefault(d, [])
                if not runs or runs[-1] is not r:
                    runs.append(r)
        return out

    def namespaces(self) -> dict[str, int]:
        """Each namespace with the time (epoch ms) of its first run."""
        out: dict[str, int] = {}
        for r in self.runs:
            for n in (r.job, *r.inputs, *r.outputs):
                out[n.namespace] = min(out.get(n.namespace, r.started_ms), r.started_ms)
        return out

    def run(self, run_id: str) -> Run | None:
        return next((r for r in self.runs if r.id == run_id), None)


def dataset_name(uri: str) -> Name:
    """OpenLineage's naming of a URI: `s3://b/k` -> (`s3://b`, `k`), `file:///x` -> (`file`,
    `/x`); `s3a://` is spelled `s3://`."""
    parts = urlsplit(uri)
    scheme = (parts.scheme or "file").lower()
    if scheme == "s3a":
        scheme = "s3"
    if scheme == "file" or not parts.netloc:
        return Name(scheme, parts.path or uri)
    return Name(f"{scheme}://{parts.netloc}", parts.path.lstrip("/"))


def _attributes(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        if set(value) == {"key", "value"}:  # DuckDB's MAP as two lists
            return dict(zip(value["key"], value["value"], strict=True))
        return {str(k): str(v) for k, v in value.items()}
    return {}


def _dataset(event_attrs: Mapping[str, str], transit_uri: str | None) -> Name | None:
    ns, name = (
        event_attrs.get("openlineage.dataset.namespace"),
        event_attrs.get("openlineage.dataset.name"),
    )
    if ns and name:
        return Name(ns, name)
    table = event_attrs.get("table")
    if table:  # a file slice a table commit wrote: the dataset is its table
        return dataset_name(table)
    return dataset_name(transit_uri) if transit_uri else None


def _job(attrs: Mapping[str, str], component_id: str) -> Name:
    ns, name = attrs.get("openlineage.job.namespace"), attrs.get("openlineage.job.name")
    if ns and name:
        return Name(ns, name)
    table = attrs.get("flowledger.table") or attrs.get("table")
    if component_id == OWN_NAMESPACE and table:  # no component named: the table's writer
        return Name(OWN_NAMESPACE, "write " + table.rstrip("/").rsplit("/", 1)[-1])
    return Name(OWN_NAMESPACE, attrs.get("spark.app.name") or component_id)


def _unique(names: Iterable[Name]) -> tuple[Name, ...]:
    return tuple(dict.fromkeys(names))


def _run(marker: str, rows: Sequence[tuple[Any, ...]]) -> Run:
    attrs: dict[str, str] = {}
    inputs: list[Name] = []
    outputs: list[Name] = []
    failed = False
    own = {r[9] for r in rows}
    for _, kind, _t, _c, _ct, transit, _s, _d, raw, _f, parents in rows:
        event_attrs = _attributes(raw)
        attrs.update(event_attrs)
        if kind == "RECEIVE" and (d := _dataset(event_attrs, transit)) is not None:
            inputs.append(d)
        elif kind == "SEND" and (d := _dataset(event_attrs, transit)) is not None:
            outputs.append(d)
        elif kind == "JOIN" and event_attrs.get("table") and set(parents or ()) - own:
            # A file slice built from slices of earlier commits (a superseded slice, the base
            # and logs a compaction merged): the run read the table's previous version.
            inputs.append(dataset_name(event_attrs["table"]))
        failed = failed or kind == "DROP"
    table = attrs.get("flowledger.table")
    if table:  # a commit of a table (a Spark write names its files): it wrote the table
        outputs = [dataset_name(table)]
    times = [int(r[2]) for r in rows]
    run_id = attrs.get("openlineage.run.id") or str(uuid.uuid5(uuid.NAMESPACE_URL, marker))
    return Run(
        id=run_id,
        job=_job(attrs, str(rows[0][3])),
        started_ms=min(times),
        ended_ms=max(times),
        failed=failed,
        inputs=_unique(inputs),
        outputs=_unique(outputs),
        details=str(rows[0][7] or ""),
        marker=marker,
        attributes=attrs,
    )


def build(rows: Iterable[tuple[Any, ...]], high_water: int = -1) -> Catalog:
    """The catalog of the rows `_QUERY` answers (grouped by marker, in event order)."""
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault(str(row[0]), []).append(row)
    runs = [_run(marker, g) for marker, g in groups.items()]
    runs.sort(key=lambda r: (r.started_ms, r.id))
    return Catalog(tuple(runs), high_water)


def load(repo: ProvenanceRepository) -> Catalog:
    """The catalog of every run recorded in `repo` (events still in journals included)."""
    high = repo.max_event_id()
    _, rows = repo.sql(_QUERY)
    return build(rows, high)


class CatalogCache:
    """One process's catalog, rebuilt only when events were added since it was built."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None

    def get(self, repo: ProvenanceRepository) -> Catalog:
        with self._lock:
            cached = self._catalog
            if cached is None or cached.high_water != repo.max_event_id():
                cached = self._catalog = load(repo)
            return cached
