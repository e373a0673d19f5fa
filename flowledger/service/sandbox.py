"""The SQL sandbox of `POST /sql` and `POST /tables/{name}/sql`: one SELECT that reads only
the view `provenance` (and, for a table, the table's views: its name and `t`).

Layers, each enough on its own for what it guards:
1. DuckDB parses the text (`extract_statements`): exactly one statement, of type SELECT — so
   no COPY/EXPORT, ATTACH, INSTALL/LOAD, SET/PRAGMA, CREATE, ...
2. An allow-list over DuckDB's own parse tree (`json_serialize_sql`): the only tables it may
   name are the connection's views (or a CTE of the query); the only table functions are generators
   (`range`, `generate_series`, `unnest`) — no `read_csv`, `read_text`, `glob`, replacement
   scans of file names, `duckdb_settings()`, ...
3. The connection itself (`provenance.sql.connect`): external access off, configuration
   locked, allowed paths = the repository's committed files, temp folder = a private folder.
4. Resources: at most `sql_concurrency` queries at once on threads of their own, a bounded
   queue before them (sql_slots.py: others are refused with 503); each request bounded by
   `sql_timeout_s` as a whole (DuckDB `interrupt()` from a timer, then the deadline checked
   while the answer is converted), by `sql_max_rows` rows and `sql_max_answer_bytes` bytes
   (sql_answer.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from provenance import ProvenanceRepository
from timeline import sandbox_connect, sandbox_lock_down

from .errors import Forbidden, InvalidRequest, QueryOverLimit, QueryTimeout
from .settings import ServiceSettings
from .sql_answer import BATCH_ROWS, bounded_json
from .sql_slots import SqlSlots

VIEW = "provenance"
VIEWS = frozenset({VIEW})
ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
_GENERATORS = ", ".join(sorted(ALLOWED_TABLE_FUNCTIONS))


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _cte_names(tree: Any) -> set[str]:
    names: set[str] = set()
    for node in _nodes(tree):
        cte = node.get("cte_map")
        if isinstance(cte, dict):
            names |= {str(e.get("key", "")).lower() for e in cte.get("map", [])}
    return names


class SqlSandbox:
    def __init__(
        self, prov: ProvenanceRepository, settings: ServiceSettings, temp_dir: Path
    ) -> None:
        self.prov = prov
        self.settings = settings
        self.temp_dir = temp_dir
        self.slots = SqlSlots(
            settings.sql_concurrency, settings.sql_queue_size, settings.sql_queue_timeout_s
        )
        # A connection that only parses (json_serialize_sql); it never sees data.
        self._parser = sandbox_lock_down(sandbox_connect())
        self._parser_lock = threading.Lock()

    def close(self) -> None:
        self.slots.close()
        self._parser.close()

    # -- checking --------------------------------------------------------------------------
    def check(self, sql: str, views: Iterable[str] = VIEWS) -> None:
        """Refuse anything but one SELECT over `views` (Forbidden / InvalidRequest)."""
        allowed = frozenset(v.lower() for v in views)
        shown_views = " and ".join(repr(v) for v in sorted(allowed))
        with self._parser_lock:
            try:
                statements = self._parser.extract_statements(sql)
            except duckdb.Error as exc:
                raise InvalidRequest(f"cannot parse SQL: {_first_line(exc)}") from exc
            if len(statements) != 1:
                raise Forbidden(f"send exactly one statement, got {len(statements)}")
            kind = statements[0].type
            if kind != duckdb.StatementType.SELECT:
                raise Forbidden(
                    f"only SELECT over {shown_views} is allowed, not {kind.name} statements"
                )
            row = self._parser.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        tree = json.loads(row[0]) if row else {"error": True}
        if tree.get("error"):
            raise Forbidden(
                f"only a plain SELECT over {shown_views} is allowed "
                f"({tree.get('error_message', 'not serializable')})"
            )
        ctes = _cte_names(tree)
        for node in _nodes(tree):
            ntype = node.get("type")
            if ntype == "BASE_TABLE":
                name = str(node.get("table_name", "")).lower()
                schema = str(node.get("schema_name", "")).lower()
                catalog = str(node.get("catalog_name", "")).lower()
                if name in ctes and not schema and not catalog:
                    continue
                if (
                    name not in allowed
                    or schema not in ("", "main")
                    or catalog not in ("", "memory")
                ):
                    shown = ".".join(p for p in (catalog, schema, name) if p)
                    raise Forbidden(f"only {shown_views} can be read, not {shown!r}")
            elif ntype == "TABLE_FUNCTION":
                fn = node.get("function") or {}
                fname = str(fn.get("function_name", "?")).lower()
                if fname not in ALLOWED_TABLE_FUNCTIONS:
                    raise Forbidden(
                        f"table function {fname}() is not allowed: only {shown_views} can "
                        f"be read (generators allowed: {_GENERATORS})"
                    )

    # -- running ---------------------------------------------------------------------------
    def _connect(self) -> duckdb.DuckDBPyConnection:
        """The view over the current snapshot. A rollover or another query pruning the local
        cache between listing and binding can remove a file: take a fresh snapshot once."""
        memory = self.settings.sql_memory_limit
        try:
            return self.prov.sql_connection(self.temp_dir, memory)
        except (duckdb.IOException, FileNotFoundError):
            return self.prov.sql_connection(self.temp_dir, memory)

    def run(self, sql: str, max_rows: int | None = None) -> bytes:
        """`check`, then `execute`."""
        self.check(sql)
        return self.execute(sql, max_rows)

    def execute(
        self,
        sql: str,
        max_rows: int | None = None,
        connect: Callable[[], duckdb.DuckDBPyConnection] | None = None,
    ) -> bytes:
        """The JSON answer of a checked query (on an SQL thread: see sql_slots.py), bounded in
        rows, bytes (sql_answer.py) and time: a timer interrupts DuckDB at the deadline and
        the conversion after it checks the same deadline. Connecting is inside the deadline
        too (a table's files may have to be fetched)."""
        s = self.settings
        limit = min(max_rows or s.sql_max_rows, s.sql_max_rows)
        deadline = time.monotonic() + s.sql_timeout_s
        con = (connect or self._connect)()
        fired = threading.Event()

        def stop() -> None:
            fired.set()
            con.interrupt()

        timer = threading.Timer(max(0.0, deadline - time.monotonic()), stop)
        timer.name = "flowledger-sql-timeout"
        timer.daemon = True
        timer.start()
        try:
            # con.sql(): a streaming result, read batch by batch (execute() materializes all).
            rel = con.sql(sql)
            if rel is None:  # check() lets only SELECT through; a SELECT has a relation
                raise InvalidRequest("the statement returned no rows")
            reader = rel.to_arrow_reader(min(limit + 1, BATCH_ROWS))
            return bounded_json(
                reader, list(rel.columns), limit, s.sql_max_answer_bytes, deadline, s.sql_timeout_s
            )
        except (duckdb.Error, OSError, pa.ArrowException) as exc:
            # An interrupt surfaces as a DuckDB error or, inside the Arrow reader, an OSError.
            if fired.is_set():
                limit_s = s.sql_timeout_s
                raise QueryTimeout(f"query interrupted after the {limit_s:g} s limit") from exc
            if isinstance(exc, duckdb.OutOfMemoryException):
                raise QueryOverLimit(
                    f"query needs more than the {s.sql_memory_limit} byte memory limit "
                    f"(sql_memory_limit): {_first_line(exc)}"
                ) from exc
            raise InvalidRequest(f"query failed: {_first_line(exc)}") from exc
        finally:
            timer.cancel()
            con.close()


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500]
