"""The DuckDB view `provenance` (exactly the columns and types of docs/provenance.md).

DuckDB cannot fetch httpfs here, so the view reads local copies of the committed files
(immutable, so a cache is always consistent) plus the not-yet-merged journals, registered as an
Arrow table (only ids >= the committed high-water mark, so an event is never seen twice across
a rollover). The connection can read only those files and accepts only SELECT statements.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from timeline import sandbox_lock_down

from .catalog import Snapshot
from .errors import ReadOnlyQuery, SQLError
from .layout import JournalRef
from .objects import ParquetSource
from .schema import SCHEMA, SQL_TYPES, VIEW_COLUMNS

VIEW = "provenance"

#: What a view beside `provenance` reads: local Parquet files (they join the allowed paths;
#: files with columns added later are read by name, missing ones as nulls) or an Arrow table.
ViewSource: TypeAlias = Sequence[Path] | pa.Table


def empty_file(cache: Path) -> Path:
    """A Parquet file with the schema and no rows, so the view exists on an empty repo."""
    path = cache / "empty-v1.parquet"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        # A name of its own: concurrent first queries (threads, processes) race here.
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        pq.write_table(SCHEMA.empty_table(), tmp)
        tmp.replace(path)
    return path


def _list(paths: Sequence[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def quoted(name: str) -> str:
    """`name` as a DuckDB identifier (any text: table names may hold '-' or '.')."""
    return '"' + name.replace('"', '""') + '"'


def _add_views(con: duckdb.DuckDBPyConnection, views: Mapping[str, ViewSource]) -> None:
    for i, (name, source) in enumerate(views.items()):
        if isinstance(source, pa.Table):
            con.register(f"_flowledger_arrow_{i}", source)
            body = f"SELECT * FROM _flowledger_arrow_{i}"
        else:
            if not source:
                raise ValueError(f"view {name}: no files (pass an empty Arrow table instead)")
            # The files hold every column, partition columns included: their values come from
            # the files as written, never from `col=value` folder names DuckDB would parse.
            body = (
                f"SELECT * FROM read_parquet({_list(source)}, union_by_name=true, "
                "hive_partitioning=false)"
            )
        con.execute(f"CREATE VIEW {quoted(name)} AS {body}")


def connect(
    committed: Sequence[Path],
    journals: pa.Table | None,
    high_water: int,
    cache: Path,
    temp_dir: Path | None = None,
    memory_limit_bytes: int | None = None,
    views: Mapping[str, ViewSource] | None = None,
) -> duckdb.DuckDBPyConnection:
    """The view over local copies of committed files plus the (in-memory) journals, and
    `views` beside it (e.g. a table's snapshot, read-only like everything here).

    DuckDB may always read its own temp folder, even with external access off: it is a
    private folder (`temp_dir`, default `<cache>/duckdb-tmp`), never the working directory.
    `memory_limit_bytes`: DuckDB's memory_limit (its default: 80 % of the machine's memory,
    per connection)."""
    empty = empty_file(cache)
    tmp = temp_dir or cache / "duckdb-tmp"
    tmp.mkdir(parents=True, exist_ok=True, mode=0o700)
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.execute(f"SET temp_directory='{str(tmp).replace(chr(39), chr(39) * 2)}'")
    views = views or {}
    extra = [p for v in views.values() if not isinstance(v, pa.Table) for p in v]
    con.execute(f"SET allowed_paths={_list([empty, *committed, *extra])}")
    if memory_limit_bytes is not None:
        con.execute(f"SET memory_limit='{max(1, memory_limit_bytes // 2**20)}MiB'")
    cols = ", ".join(f"CAST({c} AS {SQL_TYPES[c]}) AS {c}" for c in VIEW_COLUMNS)
    parts = [f"SELECT {cols} FROM read_parquet({_list([empty, *committed])})"]
    if journals is not None and journals.num_rows:
        con.register("provenance_journals", journals)
        parts.append(f"SELECT {cols} FROM provenance_journals WHERE event_id >= {int(high_water)}")
    con.execute(f"CREATE VIEW {VIEW} AS " + " UNION ALL ".join(parts))
    _add_views(con, views)
    return sandbox_lock_down(con)


def connect_snapshot(
    snap: Snapshot,
    source: ParquetSource,
    load_journal: Callable[[JournalRef], pa.Table],
    temp_dir: Path | None = None,
    memory_limit_bytes: int | None = None,
    views: Mapping[str, ViewSource] | None = None,
) -> duckdb.DuckDBPyConnection:
    """`connect` over a repository snapshot: its committed files as verified local copies (the
    cache keeps only those), its unmerged journals in memory."""
    keep = {f.events_key for f in snap.files} | {f.index_key for f in snap.files if f.index_key}
    source.prune(keep)
    committed = [source.download(f.events_key, f.events_sums, f.events_size) for f in snap.files]
    journals = [load_journal(j) for j in snap.journals]
    recent = pa.concat_tables(journals) if journals else None
    cache = source.local_path("")
    return connect(committed, recent, snap.high_water, cache, temp_dir, memory_limit_bytes, views)


def run(
    con: duckdb.DuckDBPyConnection, sql: str, what: str = "provenance sql"
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one read-only statement; returns (column names, rows). `what` names the command
    in the refusal."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise SQLError(f"cannot parse SQL: {exc}") from exc
    if len(statements) != 1:
        raise ReadOnlyQuery(f"expected exactly one statement, got {len(statements)}")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise ReadOnlyQuery(
            f"{what} is read-only: {statements[0].type.name} statements are not allowed"
        )
    try:
        rel = con.execute(sql)
    except duckdb.Error as exc:
        raise SQLError(f"query failed: {exc}") from exc
    names = [d[0] for d in rel.description or ()]
    return names, rel.fetchall()
