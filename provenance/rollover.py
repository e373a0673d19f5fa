"""Rollover: merge the contiguous run of journals above the high-water mark into one sorted,
compressed Parquet file (plus its term index), committed as one instant on the timeline; then
delete the merged journals.

Crash safety: before the commit, nothing is visible (the timeline discards the pending instant
and the journals are still there, so the next rollover redoes the work); after it, merged
journals lie below the high-water mark, so readers ignore them and recovery deletes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from storage import NotFound, ObjectInfo, ObjectStore, ProgressCallback, report_progress

from . import crash, staging
from .errors import ProvenanceConflict
from .index import build_terms
from .journal_logs import LogIndex, delete_merged_logs
from .layout import JOURNALS, JournalRef, is_log_key, journals_after, parse_journal_key
from .parquet_io import encode_events_file, encode_index
from .settings import ProvenanceSettings
from .table import ProvenanceTable

log = logging.getLogger("flowledger.provenance")

#: Raises if committed ids at or above the high-water mark (first argument) are held by none
#: of the listed journals and no open allocation explains it (provenance/holes.py).
Verify = Callable[[int, Sequence[JournalRef]], None]


@dataclass(frozen=True)
class RolloverResult:
    files: int
    events: int
    journals: int
    bytes_in: int
    bytes_out: int
    seconds: float
    first_id: int = -1
    end_id: int = -1


def list_journals(
    store: ObjectStore,
    high_water: int,
    manifests: staging.Manifests | None = None,
    logs: LogIndex | None = None,
) -> list[tuple[JournalRef, ObjectInfo]]:
    """Unmerged journals; a staged ingest's manifest is expanded into its parts (one GET,
    none when `manifests` knows it), an append-only log into its blocks (read from where
    `logs` last stopped)."""
    return list_journals_and_logs(store, high_water, manifests, logs)[0]


def list_journals_and_logs(
    store: ObjectStore,
    high_water: int,
    manifests: staging.Manifests | None = None,
    logs: LogIndex | None = None,
) -> tuple[list[tuple[JournalRef, ObjectInfo]], list[ObjectInfo]]:
    """`list_journals`, and the append-only logs listed (they may grow later)."""
    out, found_logs = [], []
    for info in store.list(JOURNALS, start_after=journals_after(high_water)):
        if is_log_key(info.key):
            found_logs.append(info)
            out += log_blocks(store, info, high_water, logs)
            continue
        ref = parse_journal_key(info.key, info.size)
        if ref is not None and ref.first_id >= high_water:
            out.append((ref, info))
        span = staging.parse_manifest_key(info.key) if ref is None else None
        if span is not None and span[1] > high_water:
            try:
                parts = staging.expand(store, info.key, manifests)
            except NotFound:
                continue  # merged and deleted by a concurrent rollover since the LIST
            out += [(p, info) for p in parts if p.first_id >= high_water]
    return unique(sorted(out, key=lambda p: p[0].first_id)), found_logs


def log_blocks(
    store: ObjectStore, info: ObjectInfo, high_water: int, logs: LogIndex | None = None
) -> list[tuple[JournalRef, ObjectInfo]]:
    blocks = (logs or LogIndex()).blocks(store, info.key)
    return [(b, info) for b in blocks if b.first_id >= high_water]


def unique(journals: list[tuple[JournalRef, ObjectInfo]]) -> list[tuple[JournalRef, ObjectInfo]]:
    """Sorted journals without repeats: a block whose append failed is written again (same
    ids, same bytes) into a new log, and the failed copy may have reached the disk too."""
    out: list[tuple[JournalRef, ObjectInfo]] = []
    for j in journals:
        if out and (out[-1][0].first_id, out[-1][0].end_id) == (j[0].first_id, j[0].end_id):
            continue
        out.append(j)
    return out


def contiguous_run(
    journals: Sequence[tuple[JournalRef, ObjectInfo]],
    high_water: int,
    gap_timeout_s: float,
    max_bytes: int,
    now: datetime | None = None,
) -> list[JournalRef]:
    """Journals starting exactly at the high-water mark, without holes, up to `max_bytes`.

    A hole (ids allocated by a writer that died before its journal landed) is skipped only
    once the journal after it is older than `gap_timeout_s`; until then a slow writer may
    still complete it.
    """
    now = now or datetime.now(UTC)
    expected = high_water
    run: list[JournalRef] = []
    total = 0
    for ref, info in journals:
        if ref.first_id < expected:
            continue  # already merged (a crash left it behind)
        if ref.first_id > expected:
            age = (now - info.last_modified).total_seconds() if info.last_modified else 0.0
            if age < gap_timeout_s:
                break
            log.warning(
                "provenance: event ids %d..%d were allocated but never written (a writer "
                "died or failed mid-flush: an open allocation); skipping the hole",
                expected,
                ref.first_id - 1,
            )
        if run and total + ref.size > max_bytes:
            break
        run.append(ref)
        total += ref.size
        expected = ref.end_id
    return run


def file_stats(t: pa.Table) -> dict[str, dict[str, int]]:
    def mm(name: str) -> dict[str, int]:
        col = t.column(name)
        if col.type == pa.timestamp("ms"):
            col = col.cast(pa.int64())
        r = pc.min_max(col)
        return {
            "min": int(r["min"].as_py() or 0),
            "max": int(r["max"].as_py() or 0),
            "nulls": int(col.null_count),
        }

    return {
        "event_id": mm("event_id"),
        "event_time": mm("event_time"),
        "file_size": mm("file_size"),
    }


def rollover_once(
    store: ObjectStore,
    table: ProvenanceTable,
    settings: ProvenanceSettings,
    progress: ProgressCallback | None = None,
    done: int = 0,
    verify: Verify | None = None,
    manifests: staging.Manifests | None = None,
) -> RolloverResult | None:
    """`progress`: one unit per journal read (`done` journals read by earlier calls; the
    total is those plus the unmerged journals listed now). `verify`: a hole that held
    committed events stops the rollover (skipping it would lose them silently)."""
    started = time.monotonic()
    high = table.committed(fresh=True).high_water
    journals = list_journals(store, high, manifests)
    if verify is not None:
        verify(high, [ref for ref, _ in journals])
    report_progress(progress, 0, done + len(journals))
    run = contiguous_run(journals, high, settings.journal_gap_timeout_s, settings.rollover_size)
    if not run:
        return None
    try:
        tables = []
        for j in run:
            tables.append(staging.load(store, j))
            report_progress(progress, 1)
    except NotFound as exc:
        # Only a rollover deletes journals, and only after committing them.
        raise ProvenanceConflict(
            f"journal {exc.uri or ''} vanished: another rollover merged it first"
        ) from exc
    crash.point("provenance.rollover.journals_read")
    merged = pa.concat_tables(tables).sort_by("event_id")
    first, end = run[0].first_id, run[-1].end_id
    events = encode_events_file(
        merged, settings.row_group_events, settings.compression, settings.compression_level
    )
    fields = (*settings.indexed_fields, *(f"attr.{a}" for a in settings.indexed_attributes))
    terms = build_terms(merged, fields, settings.row_group_events)
    index = encode_index(terms, settings.index_row_group_terms, settings.compression)
    table.commit_rollover(first, end, events, index, file_stats(merged), merged.num_rows, len(run))
    crash.point("provenance.rollover.committed")
    delete_run(store, run)
    crash.point("provenance.rollover.journals_deleted")
    return RolloverResult(
        1,
        merged.num_rows,
        len(run),
        sum(j.size for j in run),
        len(events) + len(index),
        time.monotonic() - started,
        first,
        end,
    )


def delete_run(store: ObjectStore, run: Sequence[JournalRef], logs: LogIndex | None = None) -> None:
    """Delete merged journals; a staged ingest's manifest goes with its last part; a log once
    every block of it is merged and its writer has moved on (else a later rollover or
    recovery deletes it)."""
    store.delete_many([j.key for j in run if j.log is None])
    store.delete_many([j.group for j in run if j.group and staging.is_last_part(j)])
    if run:
        delete_merged_logs(store, [j.log for j in run if j.log], run[-1].end_id, logs)


def delete_merged_journals(
    store: ObjectStore, high_water: int, manifests: staging.Manifests | None = None
) -> int:
    """Recovery: journals wholly below the high-water mark were merged; delete them (and the
    merged parts of staged ingests)."""
    stale, deleted, logs = [], 0, []
    for info in store.list(JOURNALS):
        if is_log_key(info.key):
            logs.append(info.key)
            continue
        ref = parse_journal_key(info.key)
        if ref is not None:
            if ref.end_id <= high_water:
                stale.append(info.key)
            continue
        span = staging.parse_manifest_key(info.key)
        if span is not None and span[0] < high_water:
            deleted += staging.delete_group(store, info.key, high_water, manifests)
    store.delete_many(stale)
    return len(stale) + deleted + delete_merged_logs(store, logs, high_water)
