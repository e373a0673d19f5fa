"""OpenLineage in: RunEvents (as the OpenLineage Spark listener's file transport writes them, one
JSON object per line, or a JSON array) become NiFi provenance.

Each COMPLETE RunEvent with outputs is one `JobRun` (provenance/job_events.py): inputs ->
RECEIVE, the run -> JOIN/CONTENT_MODIFIED/CREATE with the run as component (component_id = run
id, component_type "OpenLineageRun", the job's namespace/name in details and attributes), a FORK
to the outputs, outputs -> SEND; transit URI = dataset namespace + name. A FAIL RunEvent
records what the run read (RECEIVE, JOIN) and a DROP whose details are the failure (the
`errorMessage` facet), and no SEND: like a rolled-back write, a failed run's outputs are not
trusted. START, RUNNING and OTHER events are skipped (the datasets are final only at COMPLETE),
and so are ABORT and runs that wrote nothing (Spark emits them for schema inference,
`collect()`, `count()`). The run id and event time identify a run's events, so ingesting the
same file twice records nothing new.
Parsing uses the `openlineage-python` models, whose validators check times and run ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.generated import parent_run
from openlineage.client.generated.base import InputDatasetFacet, OutputDatasetFacet
from openlineage.client.generated.error_message_run import ErrorMessageRunFacet
from openlineage.client.generated.input_statistics_input_dataset import (
    InputStatisticsInputDatasetFacet,
)
from openlineage.client.generated.output_statistics_output_dataset import (
    OutputStatisticsOutputDatasetFacet,
)
from openlineage.client.generated.parent_run import ParentRunFacet

from storage.timeutil import iso_to_ms

from .errors import IngestError
from .job_events import Dataset, JobRun, record_new_runs
from .repository import ProvenanceRepository

COMPONENT_TYPE = "OpenLineageRun"


@dataclass(frozen=True)
class IngestResult:
    run_events: int  # RunEvents read
    runs: int  # COMPLETE runs with outputs and FAIL runs (recorded now or before)
    skipped: int  # START/RUNNING/OTHER/ABORT, or COMPLETE without outputs
    events: int  # provenance events registered now (0 on a re-ingest)
    recorded: int = 0  # runs recorded now
    already_recorded: int = 0  # runs that were recorded before: nothing new stored for them

    @property
    def stored(self) -> bool:
        return self.events > 0

    def describe(self) -> str:
        """One line saying what was stored, and why nothing was when nothing was."""
        if self.stored:
            return f"stored {self.events} provenance events of {self.recorded} runs"
        if self.already_recorded:
            return f"nothing new stored: {self.already_recorded} runs were recorded before"
        return (
            "nothing stored: only COMPLETE runs that wrote outputs and FAIL runs become "
            f"provenance ({self.skipped} RunEvents were START/RUNNING/ABORT/OTHER or wrote "
            "nothing)"
        )


def dataset_uri(namespace: str, name: str) -> str:
    """OpenLineage's naming (namespace + name) as one URI: `file` + `/tmp/x` -> file:///tmp/x,
    `s3://bucket` + `dir/x` -> s3://bucket/dir/x."""
    if "://" in namespace:
        return namespace.rstrip("/") + "/" + name.lstrip("/")
    return f"{namespace}://{name}" if name.startswith("/") else f"{namespace}:{name}"


def _facet_dict(facets: Any, name: str) -> Mapping[str, Any]:
    value = facets.get(name) if isinstance(facets, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _object(record: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    if key not in record:
        raise KeyError(f"{where}{key}")
    value = record[key]
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}{key} must be an object, not {_kind(value)}")
    return value


def _text(record: Mapping[str, Any], key: str, where: str) -> str:
    if key not in record:
        raise KeyError(f"{where}{key}")
    value = record[key]
    if not isinstance(value, str) or not value:
        raise TypeError(f"{where}{key} must be a non-empty string, not {_kind(value)}")
    return value


def _datasets(record: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = record.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"{key} must be an array of datasets, not {_kind(value)}")
    for i, d in enumerate(value):
        if not isinstance(d, Mapping):
            raise TypeError(f"{key}[{i}] must be a dataset object, not {_kind(d)}")
        _text(d, "namespace", f"{key}[{i}].")
        _text(d, "name", f"{key}[{i}].")
    return value


def parse_run_event(record: Mapping[str, Any]) -> RunEvent:
    """A RunEvent model from its JSON form (facets other than the statistics and parent
    facets are not kept). The shape is checked field by field (KeyError / TypeError naming
    the field); the `openlineage-python` models check times, run ids and the event type."""
    run, job = _object(record, "run", ""), _object(record, "job", "")
    run_id = _text(run, "runId", "run.")
    job_namespace, job_name = _text(job, "namespace", "job."), _text(job, "name", "job.")
    event_time = _text(record, "eventTime", "")
    parent = _facet_dict(run.get("facets"), "parent")
    error = _facet_dict(run.get("facets"), "errorMessage")
    run_facets: dict[str, Any] = {}
    if isinstance(error.get("message"), str):
        run_facets["errorMessage"] = ErrorMessageRunFacet(
            message=error["message"][:4096],
            programmingLanguage=str(error.get("programmingLanguage") or "unknown"),
        )
    if parent:
        run_facets["parent"] = ParentRunFacet(
            run=parent_run.Run(runId=parent["run"]["runId"]),
            job=parent_run.Job(namespace=parent["job"]["namespace"], name=parent["job"]["name"]),
        )
    inputs = []
    for d in _datasets(record, "inputs"):
        in_facets: dict[str, InputDatasetFacet] = {}
        stats = _facet_dict(d.get("inputFacets"), "inputStatistics")
        if stats:
            in_facets["inputStatistics"] = InputStatisticsInputDatasetFacet(
                rowCount=_int(stats, "rowCount"), size=_int(stats, "size"),
                fileCount=_int(stats, "fileCount"),
            )  # fmt: skip
        inputs.append(InputDataset(namespace=d["namespace"], name=d["name"], inputFacets=in_facets))
    outputs = []
    for d in _datasets(record, "outputs"):
        out_facets: dict[str, OutputDatasetFacet] = {}
        stats = _facet_dict(d.get("outputFacets"), "outputStatistics")
        if stats:
            out_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
                rowCount=_int(stats, "rowCount"), size=_int(stats, "size"),
                fileCount=_int(stats, "fileCount"),
            )  # fmt: skip
        outputs.append(
            OutputDataset(namespace=d["namespace"], name=d["name"], outputFacets=out_facets)
        )
    kind = record.get("eventType")
    if kind is not None and (not isinstance(kind, str) or kind not in RunState.__members__):
        raise ValueError(
            f"eventType must be one of {', '.join(RunState.__members__)}, not {str(kind)[:40]!r}"
        )
    producer = record.get("producer", "")
    return RunEvent(
        eventTime=event_time,
        producer=producer if isinstance(producer, str) else str(producer),
        eventType=RunState(kind) if kind else None,
        run=Run(runId=run_id, facets=run_facets),
        job=Job(namespace=job_namespace, name=job_name),
        inputs=inputs,
        outputs=outputs,
    )


def _int(d: Mapping[str, Any], key: str) -> int | None:
    return int(d[key]) if d.get(key) is not None else None


def _dataset(namespace: str, name: str, stats: Any) -> Dataset:
    attrs = {"openlineage.dataset.namespace": namespace, "openlineage.dataset.name": name}
    size = 0
    if stats is not None:
        size = int(stats.size or 0)
        if stats.rowCount is not None:
            attrs["record.count"] = str(stats.rowCount)
    return Dataset(dataset_uri(namespace, name), size, attrs)


def job_run(event: RunEvent) -> JobRun | None:
    """The provenance of a COMPLETE RunEvent that wrote something, or of a FAIL (what it read
    and the failure); None for any other event."""
    failure = None
    if event.eventType == RunState.FAIL:
        error = (event.run.facets or {}).get("errorMessage")
        failure = error.message if isinstance(error, ErrorMessageRunFacet) else "the run failed"
    elif event.eventType != RunState.COMPLETE or not event.outputs:
        return None  # Spark emits output-less runs for schema inference, collect(), count()
    run_id, job = event.run.runId, event.job
    marker = f"openlineage:run/{run_id}@{event.eventTime}"
    attrs = {
        "openlineage.job.namespace": job.namespace,
        "openlineage.job.name": job.name,
        "openlineage.run.id": run_id,
        "openlineage.producer": event.producer,
    }
    parent = (event.run.facets or {}).get("parent")
    if isinstance(parent, ParentRunFacet):
        attrs["openlineage.parent.run.id"] = parent.run.runId
        attrs["openlineage.parent.job.name"] = parent.job.name
    inputs = tuple(
        _dataset(d.namespace, d.name, (d.inputFacets or {}).get("inputStatistics"))
        for d in event.inputs or ()
    )
    outputs = tuple(
        _dataset(d.namespace, d.name, (d.outputFacets or {}).get("outputStatistics"))
        for d in event.outputs or ()
    )
    if failure is not None:
        attrs["openlineage.run.state"] = "FAIL"
    return JobRun(
        key=marker,
        marker=marker,
        component_id=run_id,
        component_type=COMPONENT_TYPE,
        event_time=iso_to_ms(event.eventTime),
        details=f"{job.namespace}/{job.name} run {run_id}",
        inputs=inputs,
        outputs=() if failure is not None else outputs,
        attributes=attrs,
        failure=failure,
        component_name=f"{job.namespace}/{job.name}",
    )


def _records(stream: IO[str]) -> list[tuple[str, Any]]:
    text = stream.read()
    if text.lstrip().startswith("["):
        try:
            return [(f"record {i}", r) for i, r in enumerate(json.loads(text), 1)]
        except ValueError as exc:
            raise IngestError(f"not a JSON array of OpenLineage events: {exc}") from exc
        except RecursionError:
            raise IngestError("not a JSON array of OpenLineage events: nested too deeply") from None
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append((f"line {n}", json.loads(line)))
            except ValueError as exc:
                raise IngestError(f"line {n}: not JSON: {exc}") from exc
            except RecursionError:
                raise IngestError(f"line {n}: JSON nested too deeply") from None
    return records


def _run_events(records: Iterable[tuple[str, Any]]) -> Iterator[RunEvent]:
    for where, rec in records:
        if not isinstance(rec, dict):
            raise IngestError(f"{where}: expected an OpenLineage event (a JSON object)")
        if "run" not in rec and "eventType" not in rec:
            if "dataset" in rec or "job" in rec:
                continue  # a DatasetEvent or JobEvent: no run to record
            raise IngestError(
                f"{where}: not an OpenLineage event: a RunEvent needs run, job and eventTime "
                "(a JobEvent has job, a DatasetEvent dataset)"
            )
        try:
            yield parse_run_event(rec)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise IngestError(f"{where}: not a valid OpenLineage RunEvent: {detail}") from exc


def read_run_events(stream: IO[str]) -> Iterator[RunEvent]:
    """RunEvents of a JSON-lines file (the file transport), a JSON array or one object.
    Dataset and job events (no `run`) are not RunEvents and are left out."""
    return _run_events(_records(stream))


def _record(repo: ProvenanceRepository, events: list[RunEvent]) -> IngestResult:
    runs = [r for r in map(job_run, events) if r is not None]
    recorded, added = record_new_runs(repo, runs)
    distinct = len({r.key for r in runs})
    return IngestResult(
        len(events), distinct, len(events) - len(runs), added, recorded, distinct - recorded
    )


def ingest(repo: ProvenanceRepository, stream: IO[str]) -> IngestResult:
    """Parse every RunEvent first (a bad one writes nothing), then record the new runs."""
    return _record(repo, list(read_run_events(stream)))


def ingest_json(repo: ProvenanceRepository, body: Any) -> IngestResult:
    """One posted event (Marquez's `POST /api/v1/lineage`) or a JSON array of them."""
    items = body if isinstance(body, list) else [body]
    return _record(repo, list(_run_events((f"event {i}", r) for i, r in enumerate(items, 1))))
