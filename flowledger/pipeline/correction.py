"""The late correction as it happens in real life, and what follows from it incrementally.

1. The re-delivered month is applied to `flights_enriched` by key: its corrected flights are
   upserted (the diverted flights' arrival delays, revision 2) and its cancelled flights
   deleted. The table is merge-on-read: each is a delta commit appending log files to the file
   groups holding those keys, no base file is rewritten (docs/tables.md); the pipeline
   compacts them afterwards (mor.py).
2. `delays_by_carrier` is recomputed from the *changes* since its last run: a CDC read of
   `flights_enriched` after the instant its rows were computed from (kept in its commits'
   metadata, `SOURCE_INSTANT`) names the carriers whose flights changed (before and after
   images: a deleted flight counts); only their rows are recomputed and upserted.
3. Each commit's provenance is recorded per written log file or slice (mor.record_write), so
   one SQL query joins a corrected row (its `_flowledger_commit_time`) to the raw input
   files it came from, through the base slice its log was attached to.

The writes go through the Python path (`Table.upsert`, `Table.delete`) from the DataFrames'
Arrow form; Spark computes and reads (merging logs on its executors).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from provenance import ProvenanceRepository
from timeline import DataFile, Table, data_instant_time

from ..slice_provenance import CommitJob, record_commit
from ..table_sql import connect
from . import mor, transform
from . import tables as tbl
from .record import COMPONENT_TYPE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: One corrected row joined to the input files its lineage reaches (a recursive walk over
#: the parents of the FlowFiles that made its slice: every earlier slice of its file group,
#: the job that first wrote it, the raw files that job joined).
ROW_TO_INPUTS = """
WITH RECURSIVE
  row AS (SELECT flight_id, arr_delay, revision, _flowledger_commit_time AS written_by
          FROM flights_enriched WHERE revision = 2 ORDER BY flight_id LIMIT 1),
  slice AS (SELECT DISTINCT p.flowfile_uuid AS uuid FROM provenance p JOIN row
            ON p.updated_attributes['instant.time'] = row.written_by
            WHERE p.event_type = 'SEND'
              AND p.updated_attributes['table'] LIKE '%/flights_enriched'),
  ancestor(uuid) AS (SELECT uuid FROM slice UNION
            SELECT unnest(e.parent_uuids) FROM provenance e JOIN ancestor a
            ON list_contains(e.child_uuids, a.uuid))
SELECT DISTINCT row.flight_id, row.arr_delay, row.revision, row.written_by,
       regexp_extract(r.transit_uri, '[^/]+$') AS input_file
FROM row, provenance r JOIN ancestor a ON r.flowfile_uuid = a.uuid
WHERE r.event_type = 'RECEIVE'
ORDER BY input_file
""".strip()


@dataclass(frozen=True)
class SliceChange:
    """A file group of `flights_enriched`: its base slice before and after the correction,
    and the log files attached to the slice after it (merge-on-read)."""

    partition: str
    file_group: str
    before: str | None  # instant of the base slice (None: the group did not exist)
    after: str | None
    rows_before: int
    rows_after: int
    logs: int = 0  # log files of the slice after
    log_rows: int = 0  # records in them (upserts and deletes)


@dataclass
class CorrectionResult:
    month: int
    upserted: int = 0
    deleted: int = 0
    upsert_instant: str = ""
    delete_instant: str = ""
    #: FlowFile UUIDs of what the correction wrote (log files, or slices).
    written: list[str] = field(default_factory=list)
    slices: list[SliceChange] = field(default_factory=list)
    #: The incremental recomputation of delays_by_carrier.
    changes_since: str = ""
    changed_rows: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    carriers: list[str] = field(default_factory=list)
    delays_instant: str = ""
    #: The row-to-input SQL and its answer.
    sql: str = ROW_TO_INPUTS
    sql_columns: list[str] = field(default_factory=list)
    sql_rows: list[tuple[Any, ...]] = field(default_factory=list)


def _slice_of(f: DataFile) -> str:
    return data_instant_time(f.path) or "?"  # data files live under their instant's prefix


def slice_changes(table: Table, before: str, after: str) -> list[SliceChange]:
    """Every file group of `table` as of `before` and `after` (instants)."""
    old = {f.group: f for f in table.snapshot(before).files}
    now = table.snapshot(after)
    new = {f.group: f for f in now.files}
    logs = {sl.group: sl.logs for sl in now.merge_on_read_slices() or []}
    out = []

    def order(g: str) -> tuple[list[Any], str]:  # month=2 before month=10
        part = (old.get(g) or new[g]).partition
        return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", part)], g

    for g in sorted(old.keys() | new.keys(), key=order):
        o, n = old.get(g), new.get(g)
        out.append(
            SliceChange(
                partition=(o or n).partition,  # type: ignore[union-attr]
                file_group=g,
                before=_slice_of(o) if o else None,
                after=_slice_of(n) if n else None,
                rows_before=o.rows if o else 0,
                rows_after=n.rows if n else 0,
                logs=len(logs.get(g, ())),
                log_rows=sum(lf.rows for _, lf in logs.get(g, ())),
            )
        )
    return out


def apply(
    enriched: DataFrame,
    tables: tbl.Tables,
    month: int,
    prov: ProvenanceRepository | None,
    parents: tuple[str, ...],
) -> CorrectionResult:
    """Upsert the month's corrected flights, delete its cancelled ones (two delta commits)."""
    fe = tables.keyed(tbl.FLIGHTS_ENRICHED)
    result = CorrectionResult(month)
    start = fe.snapshot().instant_time
    corrected = tbl.arrow(transform.corrected_flights(enriched, month))
    cancelled = tbl.arrow(transform.cancelled_flights(enriched, month))
    job = CommitJob(
        component_id="pipeline.late_correction",
        component_type=COMPONENT_TYPE,
        parents=parents,
        details=f"late correction of month {month}",
    )
    if corrected.num_rows:
        result.upsert_instant = fe.upsert(corrected).time
        result.upserted = corrected.num_rows
        if prov is not None:
            result.written += mor.record_write(prov, fe, fe.entry(result.upsert_instant), job)
    if cancelled.num_rows:
        result.delete_instant = fe.delete(cancelled).time
        result.deleted = cancelled.num_rows
        if prov is not None:
            result.written += mor.record_write(prov, fe, fe.entry(result.delete_instant), job)
    result.slices = slice_changes(fe, start, fe.snapshot().instant_time)
    return result


def last_source_instant(delays: Table) -> str:
    """The `flights_enriched` instant the latest `delays_by_carrier` rows were computed from."""
    for e in reversed(delays.state().ordered_writes()):
        source = e.metadata.get("extra", {}).get(tbl.SOURCE_INSTANT)
        if source:
            return str(source)
    raise ValueError(f"{delays.uri} records no source instant: recompute it in full")


def recompute_delays(
    spark: SparkSession,
    tables: tbl.Tables,
    airlines: DataFrame,
    result: CorrectionResult,
    prov: ProvenanceRepository | None,
    parents: tuple[str, ...],
) -> None:
    """`delays_by_carrier` from the changes of `flights_enriched` since its last run."""
    from pyspark.sql import functions as F

    fe, delays = tables.keyed(tbl.FLIGHTS_ENRICHED), tables.keyed(tbl.DELAYS_BY_CARRIER)
    since = last_source_instant(delays)
    upto = fe.snapshot().instant_time
    changes = fe.changes(since, upto, cdc=True)
    result.changes_since = since
    result.changed_rows = changes.num_rows
    result.ops = dict(Counter(changes.column("op").to_pylist()))
    carriers: set[str] = set()
    for image in ("before", "after"):
        col = pc.struct_field(changes.column(image), "carrier")
        carriers |= {c for c in col.to_pylist() if c is not None}
    result.carriers = sorted(carriers)
    if not carriers:
        return
    flights = tbl.read(spark, tables.uri(tbl.FLIGHTS_ENRICHED), as_of=upto)
    touched = flights.where(F.col("carrier").isin(result.carriers))
    rows = tbl.arrow(transform.delays_by_carrier(touched, airlines))
    gone = sorted(carriers - set(rows.column("carrier").to_pylist()))
    extra = {tbl.SOURCE_INSTANT: upto}
    if gone:  # every flight of a carrier deleted: its row goes too
        delays.delete(pa.table({"carrier": gone}), extra_metadata=extra)
    done = delays.upsert(rows, extra_metadata=extra)
    result.delays_instant = done.time
    if prov is not None:
        # Made from what the correction wrote (and what the caller adds: airlines).
        job = CommitJob(
            component_id="pipeline.delays_by_carrier",
            component_type=COMPONENT_TYPE,
            parents=(*result.written, *parents),
            details=f"delays_by_carrier recomputed from the changes after {since}",
        )
        record_commit(prov, delays, delays.entry(done.time), job)


def row_to_inputs(prov: ProvenanceRepository, tables: tbl.Tables, result: CorrectionResult) -> None:
    """The SQL answer joining a corrected row to the raw input files it came from."""
    from provenance import sql as prov_sql

    con = connect(prov, tables.keyed(tbl.FLIGHTS_ENRICHED), name=tbl.FLIGHTS_ENRICHED)
    try:
        result.sql_columns, result.sql_rows = prov_sql.run(con, ROW_TO_INPUTS, "table sql")
    finally:
        con.close()
