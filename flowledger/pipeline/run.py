"""`flowledger pipeline run`: NYC flights 2013 from raw CSV to curated tables, with content,
provenance and timeline on one repository (see docs/pipeline.md)."""

from __future__ import annotations

import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from provenance import Query, ReplayError, SearchTerm
from provenance.replay import ReplayResult, replay
from provenance.session import FlowFile, FlowRepository
from storage import open_store
from storage.s3a import to_spark_path
from storage.uri import parse_uri, resolve_repo
from timeline import Table, check_table
from timeline.archive import ArchivalSettings, Archiver

from ..context import provenance_settings, table_settings
from ..spark import CommitInfo
from . import correction as corr
from . import mor, transform
from . import tables as tbl
from .outside import MarquezJob, OutsideRead, marquez_jobs, outside_read
from .record import Recorder, file_uuid
from .sources import RawFile, parse_csv, raw_files, spark_schema
from .streamed import StreamedInsert, insert_planes
from .trace import TraceNode, trace

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Inputs read by Spark rather than on the driver when provenance is off (bytes).
LARGE_INPUT = 1024 * 1024

#: The month the late correction re-delivers (upserts its corrected flights, deletes its
#: cancelled ones).
CORRECTION_MONTH = 12


@dataclass(frozen=True)
class PipelineOptions:
    repo: str | None = None
    spark_master: str | None = None
    #: Only the first N flights (tests); None = all 336,776.
    sample: int | None = None
    #: False: no content landing and no provenance (the benchmark's baseline).
    record_provenance: bool = True
    correction_month: int = CORRECTION_MONTH
    #: Automatic archival of the tables' and the provenance table's old instants (the CLI's
    #: `--auto-archive/--no-auto-archive`).
    auto_archive: bool = True


@dataclass
class PipelineResult:
    run_id: str
    repo_uri: str
    input_rows: dict[str, int] = field(default_factory=dict)
    table_rows: dict[str, int] = field(default_factory=dict)
    table_uris: dict[str, str] = field(default_factory=dict)
    commits: list[CommitInfo] = field(default_factory=list)
    timelines: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    maintenance: dict[str, str] = field(default_factory=dict)
    event_counts: list[tuple[str, int]] = field(default_factory=list)
    rollover: str = ""
    curated_file: str | None = None
    lineage: TraceNode | None = None
    answer: list[dict[str, Any]] = field(default_factory=list)
    #: The late correction (upsert, delete), the slices it rewrote, the incremental
    #: recomputation of delays_by_carrier and the row-to-input SQL answer.
    correction: corr.CorrectionResult | None = None
    #: flights_enriched read merged and read-optimized around the compaction that follows
    #: the correction, and the compaction's instant objects.
    compaction: mor.CompactionResult | None = None
    #: The copy-on-write `planes` table's streamed insert (a `RecordBatchReader` over the CSV).
    streamed: StreamedInsert | None = None
    replay: ReplayResult | None = None
    #: Why no SEND could be replayed (e.g. the Spark hook recorded it, without content).
    replay_problem: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: Provenance events this run registered (0 without provenance).
    events_recorded: int = 0
    #: Requests flowledger itself sent to the repository (content, provenance, timeline
    #: reads), by kind; Spark's own s3a/file I/O is not in it.
    store_requests: dict[str, int] = field(default_factory=dict)
    wall_seconds: float = 0.0
    #: The tables as plain DuckDB sees them (local repositories), and the jobs Marquez's
    #: read API lists for them.
    outside: list[OutsideRead] = field(default_factory=list)
    marquez: list[MarquezJob] = field(default_factory=list)


def _repo_uri(repo: str | None) -> str:
    """The repository URI, with a local path made absolute (Spark needs one)."""
    parsed = parse_uri(resolve_repo(repo))
    return str(parsed)


class _Stages:
    """A progress bar per stage, and each stage's wall time."""

    def __init__(self, progress: Progress, result: PipelineResult) -> None:
        self.progress = progress
        self.result = result

    @contextmanager
    def stage(self, name: str, steps: int) -> Iterator[Any]:
        task = self.progress.add_task(name, total=steps)
        started = time.monotonic()

        def advance(n: int = 1) -> None:
            self.progress.advance(task, n)

        yield advance
        self.progress.update(task, completed=steps)
        self.result.stage_seconds[name] = time.monotonic() - started


def run_pipeline(
    options: PipelineOptions, console: Console | None = None, spark: SparkSession | None = None
) -> PipelineResult:
    """Run every stage; `spark` reuses a session (tests), else one is started and stopped."""
    console = console or Console()
    repo_uri = _repo_uri(options.repo)
    run_id = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:6]}"
    result = PipelineResult(run_id, repo_uri)
    root = open_store(repo_uri)
    tables = tbl.Tables(repo_uri, root, table_settings(options.auto_archive))
    prov_settings = provenance_settings(options.auto_archive)
    flow = (
        FlowRepository.open(root, provenance_settings=prov_settings)
        if options.record_provenance
        else None
    )
    own_spark = spark is None
    started = time.monotonic()
    first_event = flow.provenance.max_event_id() if flow is not None else -1
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    try:
        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description:<28}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        with progress, tempfile.TemporaryDirectory(prefix="flowledger-pipeline-") as scratch:
            st = _Stages(progress, result)
            spark = _stages(options, st, tables, flow, spark, run_id, Path(scratch))
        if flow is not None:
            result.events_recorded = flow.provenance.max_event_id() - first_event
        result.store_requests = {k: v for k, v in root.stats.snapshot().items() if k != "PROBE"}
        result.wall_seconds = time.monotonic() - started
        return result
    finally:
        if flow is not None:
            flow.close()
        if own_spark and spark is not None:
            spark.stop()
        root.close()


def _stages(
    options: PipelineOptions,
    st: _Stages,
    tables: tbl.Tables,
    flow: FlowRepository | None,
    spark: SparkSession | None,
    run_id: str,
    scratch: Path,
) -> SparkSession:
    result = st.result
    rec = Recorder(flow, run_id) if flow is not None else None
    files = raw_files()
    with st.stage("land raw CSV (RECEIVE)", len(files) + 1) as step:
        raw: list[tuple[RawFile, bytes]] = []
        for f in files:
            raw.append((f, f.read_bytes()))
            step()
        landed = rec.land(raw) if rec is not None else {}
    with st.stage("start Spark", 1):
        spark = spark or tbl.session(tables.repo_uri, options.spark_master)
    with st.stage("type and clean (CONTENT_MODIFIED)", len(raw) + 1) as step:
        cleaned: dict[str, DataFrame] = {}
        for f, data in raw:
            sample = options.sample if f.name == "flights" else None
            df = _read_raw(spark, f, data, landed.get(f.name), flow, scratch, sample)
            cleaned[f.name] = transform.clean(f.name, df).cache()
            result.input_rows[f.name] = cleaned[f.name].count()
            step()
        if rec is not None:
            landed = rec.cleaned(landed, {n: df.toArrow() for n, df in cleaned.items()})
        step()
    with st.stage("join flights+weather+airports+planes (JOIN)", 2) as step:
        enriched = transform.enrich(cleaned).cache()
        rows = enriched.count()
        step()
        joined = None
        if rec is not None:
            parents = [landed[n] for n in ("flights", "weather", "airports", "planes")]
            joined = rec.joined(parents, rows, tbl.FLIGHTS_ENRICHED)
        step()
    with st.stage("split per carrier (FORK)", 1):
        by_carrier = enriched.groupBy("carrier").count().collect()
        counts = {r["carrier"]: int(r["count"]) for r in by_carrier}
        carriers = rec.split(joined, counts) if rec is not None and joined is not None else {}
    fe_uri, dbc_uri = tables.uri(tbl.FLIGHTS_ENRICHED), tables.uri(tbl.DELAYS_BY_CARRIER)
    result.table_uris = {tbl.FLIGHTS_ENRICHED: fe_uri, tbl.DELAYS_BY_CARRIER: dbc_uri}
    with st.stage("write curated tables (SEND)", 2) as step:
        fe = tables.keyed(tbl.FLIGHTS_ENRICHED)
        e1 = fe.entry(fe.write(tbl.arrow(enriched), mode="overwrite").time)
        c1 = tables.commit_info(tbl.FLIGHTS_ENRICHED, fe, e1, "write flights_enriched")
        result.commits.append(c1)
        curated: list[FlowFile] = []
        if rec is not None and joined is not None:
            curated = rec.sent(joined, c1, tables.read_file, "write_flights_enriched")
        step()
        delays = transform.delays_by_carrier(enriched, cleaned["airlines"])
        dbc = tables.keyed(tbl.DELAYS_BY_CARRIER)
        done = dbc.write(
            tbl.arrow(delays), mode="overwrite", extra_metadata={tbl.SOURCE_INSTANT: e1.time}
        )
        c2 = tables.commit_info(tbl.DELAYS_BY_CARRIER, dbc, dbc.entry(done.time), "delays")
        result.commits.append(c2)
        if rec is not None:
            parents = [*carriers.values(), landed["airlines"]]
            rec.sent(parents, c2, tables.read_file, "write_delays_by_carrier")
        step()
    with st.stage("stream planes (copy-on-write)", 1):
        planes = next(data for f, data in raw if f.name == tbl.PLANES)
        result.streamed, entry = insert_planes(tables, planes)
        if rec is not None and entry.added:
            info = tables.commit_info(tbl.PLANES, tables.table(tbl.PLANES), entry, "planes")
            rec.sent(landed[tbl.PLANES], info, tables.read_file, "stream_planes")
    month = options.correction_month
    prov = flow.provenance if flow is not None else None
    with st.stage(f"late correction of month {month} (upsert, delete)", 1):
        joined_ff = (joined.uuid,) if joined is not None else ()
        result.correction = fix = corr.apply(enriched, tables, month, prov, joined_ff)
        if not (fix.upserted or fix.deleted):
            result.maintenance["correction"] = f"no flights in month {month}: nothing to correct"
    with st.stage("delays_by_carrier from the changes", 1):
        airlines_ff = (landed["airlines"].uuid,) if "airlines" in landed else ()
        corr.recompute_delays(spark, tables, cleaned["airlines"], fix, prov, airlines_ff)
    with st.stage("compact flights_enriched", 1):
        result.compaction = mor.compact(tables, prov)
    with st.stage("clean and archive timelines", 2) as step:
        for name in (tbl.FLIGHTS_ENRICHED, tbl.DELAYS_BY_CARRIER):
            t = tables.table(name)
            cleaned_instant = t.maintenance.clean()
            archived = Archiver(t, ArchivalSettings()).run()
            result.maintenance[name] = (
                f"clean: {cleaned_instant.time if cleaned_instant else 'nothing to clean'}; "
                f"archive: {len(archived.archived)} instants"
                + (f" (kept: {archived.limit_reason})" if archived.limit_reason else "")
                + f"; check: {_checked(t)}"
            )
            result.timelines[name] = [
                (i.time, i.action, i.state.value) for i in t.timeline().instants
            ]
            step()
    if flow is not None:
        with st.stage("provenance rollover", 1):
            r = flow.provenance.rollover()
            result.rollover = f"{r.events} events from {r.journals} journals into {r.files} file(s)"
    with st.stage("report", 4) as step:
        for name, uri in result.table_uris.items():
            result.table_rows[name] = tbl.read(spark, uri).count()
        step()
        airlines = tbl.read(spark, dbc_uri).select("carrier", "name")
        result.answer = transform.worst_in_rain(tbl.read(spark, fe_uri), airlines)
        step()
        if flow is not None:
            _, rows_ = flow.provenance.sql(
                "SELECT event_type, count(*) FROM provenance GROUP BY 1 ORDER BY 2 DESC, 1"
            )
            result.event_counts = [(str(a), int(b)) for a, b in rows_]
            newest = _newest_file(fe_uri)
            if newest is not None:  # the file a user looks at first: after every rewrite
                result.curated_file = newest
                result.lineage = trace(flow.provenance, file_uuid(newest))
            step()
            if curated:
                target = curated[0]  # the first write's file: its SEND carried content
                first = next(f.uri for f in c1.files if file_uuid(f.uri) == target.uuid)
                replayed = _replay_send(flow, target.uuid, first)
                if isinstance(replayed, str):
                    result.replay_problem = replayed
                else:
                    result.replay = replayed
            if result.correction is not None and result.correction.upserted:
                corr.row_to_inputs(flow.provenance, tables, result.correction)
            result.marquez = marquez_jobs(flow.provenance)
        result.outside = [
            o for name, uri in result.table_uris.items() if (o := outside_read(name, uri))
        ]
        step(2)
    return spark


def _newest_file(table_uri: str) -> str | None:
    """The URI of the current file of `table_uri` that the newest instant wrote, spelled as
    the table's URI is (`s3a://` for Spark's tables, as their commits name their files)."""
    table = Table.open(open_store(table_uri))
    files = sorted(table.files(), key=lambda f: f.path.rsplit("_", 1)[-1])
    return f"{table_uri.rstrip('/')}/{files[-1].path}" if files else None


def _checked(t: Table) -> str:
    """`flowledger table check` of a table the pipeline wrote, in one phrase."""
    report = check_table(t)
    if report.ok:
        return f"ok ({report.files_checked} files, {report.snapshots_checked} snapshots verified)"
    return "; ".join(str(p) for p in report.problems)


def _read_raw(
    spark: SparkSession,
    f: RawFile,
    data: bytes,
    landed: FlowFile | None,
    flow: FlowRepository | None,
    scratch: Path,
    sample: int | None,
) -> DataFrame:
    """A raw CSV as a DataFrame. A large content owns its resource claim (one object holding
    exactly its bytes), so Spark reads that object itself, in parallel, straight from the
    repository (s3a or file); small contents share a packed claim: they are read on the
    driver (checksum verified) with pyarrow. Without provenance the files are read from disk."""
    path: str | None = None
    if flow is not None and landed is not None:
        claim = landed.content_claim
        assert claim is not None
        if claim.offset == 0 and claim.length > flow.content.settings.large_content_threshold:
            rc = claim.resource_claim
            path = to_spark_path(flow.content.containers.by_name[rc.container].store.url(rc.key))
        else:
            data = flow.content.read_bytes(claim)
    elif len(data) > LARGE_INPUT:
        local = scratch / f.filename
        local.write_bytes(data)  # e.g. flights.csv out of its zip archive
        path = local.resolve().as_uri()
    if path is None:
        return transform.to_frame(spark, parse_csv(f.name, data, sample))
    df = spark.read.csv(
        path, header=True, schema=spark_schema(f.name, data[:65536]), nullValue="NA"
    )
    return df.limit(sample) if sample is not None else df


def _replay_send(flow: FlowRepository, uuid: str, uri: str) -> ReplayResult | str:
    """Replay the SEND of a curated file: the pipeline's own (its FlowFile holds the file's
    bytes), else the one a Spark commit hook recorded for the same URI. A message says why
    when there is none to replay."""
    terms = [SearchTerm("flowfile_uuid", uuid), SearchTerm("transit_uri", uri)]
    for term in terms:
        sends = flow.provenance.query(
            Query((term, SearchTerm("event_type", "SEND")), max_results=1)
        )
        if sends:
            try:
                return replay(flow.provenance, sends[0].event_id, flow.content, "pipeline")
            except ReplayError as exc:
                return str(exc)
    return f"no SEND event recorded for {uri}"
