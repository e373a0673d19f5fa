"""Re-ingest detection: which source identifiers (NiFi's `eventId`, kept in the extension
column `source_fields`) the repository already holds. DuckDB joins the incoming identifiers
with the stored ones, reading only the committed files whose time range overlaps the
incoming events (an event keeps its time, so a duplicate cannot be anywhere else)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa


def _quote(p: Path) -> str:
    return "'" + str(p).replace("'", "''") + "'"


def count_present(
    committed: Sequence[Path],
    journals: Sequence[pa.Table],
    high_water: int,
    values: pa.Array,
    key: str,
    start_ms: int,
    end_ms: int,
) -> tuple[int, str]:
    """(how many distinct `values` are stored as `source_fields[key]`, one of them or '')."""
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone='UTC'")
        con.register("incoming", pa.table({"v": values}))
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
            f"SELECT count(DISTINCT v), min(v) FROM ({' UNION ALL '.join(parts)}) s "
            "WHERE t BETWEEN $start AND $end AND v IN (SELECT v FROM incoming)",
            {"key": key, "start": start_ms, "end": end_ms},
        ).fetchone()
    finally:
        con.close()
    return (int(row[0]), str(row[1] or "")) if row else (0, "")
