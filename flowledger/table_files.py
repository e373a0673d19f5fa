"""Exactly the data files a table's snapshot reads, for engines that read Parquet files
themselves (DuckDB, Polars, Spark, pyarrow). A table's folder also holds the files of
replaced slices, of rolled-back and uncommitted writes and merge-on-read log files: a reader
of the folder counts rows the table does not hold. Only the timeline knows which files a
snapshot reads, so the list comes from commit metadata, never from listing."""

from __future__ import annotations

from typing import Any

from timeline import Table

from .errors import LogsNotCompacted


def snapshot_files(table: Table, as_of: str | None, read_optimized: bool) -> dict[str, Any]:
    """The files the snapshot reads (full URIs, with rows and bytes) as a JSON document;
    refuses a merge-on-read snapshot with logs not compacted yet (a Parquet reader cannot
    merge them) unless `read_optimized`."""
    snap = table.snapshot(as_of)
    slices = snap.merge_on_read_slices() or []
    logs = sum(len(sl.logs) for sl in slices)
    if logs and not read_optimized:
        groups = sum(1 for sl in slices if sl.logs)
        raise LogsNotCompacted(
            f"table files: the snapshot of {table.uri} at {snap.instant_time} has {logs} log "
            f"file(s) in {groups} file group(s) not compacted yet, which a Parquet reader cannot "
            "merge: run `flowledger timeline compact --table URI` first, or pass "
            "--read-optimized for the base files only (changes still in logs not seen)"
        )
    return {
        "table": table.uri,
        "instant_time": snap.instant_time,
        "read_optimized": bool(read_optimized and logs),
        "rows": snap.rows,
        "files": [
            {"uri": table.store.url(f.path), "rows": f.rows, "size": f.size} for f in snap.files
        ],
    }


__all__ = ["snapshot_files"]
