"""Re-ingest detection: which source identifiers (NiFi's `eventId`, kept in the extension
column `source_fields`) repeat in a file, or are already in the repository.

The ingest writes the file's ids (and where each is) to a local Parquet file; DuckDB checks
them with a memory limit, spilling its hash tables to the ingest's temporary folder, so the
check does not hold every id of a big file in memory. The repository side reads only the
committed files whose time range overlaps the incoming events (an event keeps its time, so a
duplicate cannot be anywhere else) plus the unmerged journals.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

#: The local file of source ids: the id and its line (or array record) number.
IDS_SCHEMA = pa.schema([("v", pa.string()), ("i", pa.int64())])
MEMORY_LIMIT = "256MB"


def _quote(p: Path) -> str:
    return "'" + str(p).replace("'", "''") + "'"


def _connect(tmp: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.execute(f"SET memory_limit='{MEMORY_LIMIT}'")
    con.execute(f"SET temp_directory={_quote(tmp / 'duckdb-spill')}")
    con.execute("SET preserve_insertion_order=false")
    return con


def first_repeat(ids_file: Path, tmp: Path) -> tuple[str, int, int] | None:
    """(id, first place, repeated place) of the id whose repetition comes first, or None."""
    con = _connect(tmp)
    try:
        ids = f"read_parquet({_quote(ids_file)})"
        row = con.execute(
            f"WITH g AS (SELECT v, min(i) AS first FROM {ids} GROUP BY v HAVING count(*) > 1) "
            f"SELECT g.v, g.first, min(d.i) AS second FROM g JOIN {ids} d "
            "ON d.v = g.v AND d.i > g.first GROUP BY g.v, g.first ORDER BY second LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    return (str(row[0]), int(row[1]), int(row[2])) if row else None


def count_present(
    committed: Sequence[Path],
    journals: Sequence[pa.Table],
    high_water: int,
    ids_file: Path,
    key: str,
    start_ms: int,
    end_ms: int,
) -> tuple[int, str]:
    """(how many distinct ids of `ids_file` are stored as `source_fields[key]`, one of them)."""
    con = _connect(ids_file.parent)
    try:
        sel = "SELECT source_fields[$key] AS v, epoch_ms(event_time) AS t"
        parts = []
        if committed:
            files = "[" + ", ".join(_quote(p) for p in committed) + "]"
            parts.append(f"{sel} FROM read_parquet({files})")
        tables = [t.select(["event_id", "event_time", "source_fields"]) for t in journals]
        if tables:
            con.register("journals", pa.concat_tables(tables))
            parts.append(f"{sel} FROM journals WHERE event_id >= {int(high_water)}")
        if not parts:
            return 0, ""
        row = con.execute(
            f"SELECT count(DISTINCT s.v), min(s.v) FROM ({' UNION ALL '.join(parts)}) s "
            f"WHERE s.t BETWEEN $start AND $end AND s.v IN "
            f"(SELECT v FROM read_parquet({_quote(ids_file)}))",
            {"key": key, "start": start_ms, "end": end_ms},
        ).fetchone()
    finally:
        con.close()
    return (int(row[0]), str(row[1] or "")) if row else (0, "")
