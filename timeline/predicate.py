"""SQL predicates a user passes (a filter delete's `where`): one boolean expression over the
table's columns, never a program.

The text is parsed by DuckDB as the WHERE clause of `SELECT 1 FROM t WHERE (...)`; the parse
tree must be exactly that query (no second statement, set operation, ORDER BY, ...) and the
expression may hold no subquery and no table function (which is how files, globs and other
relations would be reached). It is then bound and evaluated in the sandbox every user SQL runs
in (`sql_sandbox`: external access off, configuration locked), over the rows given as an Arrow
table and nothing else. Anything else is `InvalidPredicate`, one line naming the problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from . import sql_sandbox
from .errors import InvalidPredicate

#: The name the rows have in the query; the position column keeps the answer aligned.
VIEW = "t"
POSITION = "__flowledger_pos"

#: Node classes an expression may not hold: a subquery reaches other relations (table
#: functions read files), a window function is no row predicate.
_FORBIDDEN = frozenset({"SUBQUERY", "WINDOW"})


def _query(where: str, select: str = "1") -> str:
    # The newline ends a trailing `--` comment before the closing parenthesis.
    return f"SELECT {select} FROM {VIEW} WHERE ({where}\n)"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _tree(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    row = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    return dict(json.loads(row[0])) if row else {"error": True, "error_message": "no answer"}


def _shape(node: Any) -> Any:
    """`node` without source positions and its WHERE clause: what remains must be the same
    for every accepted predicate."""
    if isinstance(node, dict):
        return {
            k: _shape(v)
            for k, v in node.items()
            if not k.startswith("query_location") and k != "where_clause"
        }
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return node


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _nodes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _nodes(v)


def _column_refs(expr: Any) -> list[str]:
    return [
        str(n["column_names"][0])
        for n in _nodes(expr)
        if n.get("class") == "COLUMN_REF" and n.get("column_names")
    ]


@dataclass(frozen=True)
class Predicate:
    """A predicate that parsed as one expression: its text and DuckDB's tree of it."""

    text: str
    tree: str  # the expression, as json_serialize_sql wrote it

    @property
    def expression(self) -> Any:
        return json.loads(self.tree)


def parse(where: str | Predicate) -> Predicate:
    """`where` as a `Predicate`, or `InvalidPredicate` when it is not exactly one expression
    free of subqueries and table functions."""
    if isinstance(where, Predicate):
        return where
    if not isinstance(where, str) or not where.strip():
        raise InvalidPredicate("the predicate (where) is empty: give one SQL boolean expression")
    con = sql_sandbox.lock_down(sql_sandbox.connect())
    try:
        got = _tree(con, _query(where))
        expected = _tree(con, _query("true"))
    finally:
        con.close()
    if got.get("error"):
        problem = str(got.get("error_message", "")).strip().splitlines() or ["cannot parse it"]
        raise InvalidPredicate(
            f"the predicate (where) is not one SQL expression: {problem[0]} (in {where!r})"
        )
    statements = got.get("statements") or []
    if len(statements) != 1 or _shape(statements[0]) != _shape(expected["statements"][0]):
        raise InvalidPredicate(
            f"the predicate (where) must be one boolean expression over the table's columns, "
            f"not a statement or query: {where!r}"
        )
    expr = statements[0]["node"]["where_clause"]
    for n in _nodes(expr):
        if n.get("class") in _FORBIDDEN or n.get("type") == "TABLE_FUNCTION":
            what = "subquery" if n.get("class") == "SUBQUERY" else str(n.get("class")).lower()
            raise InvalidPredicate(
                f"the predicate (where) may only use the table's columns, constants and "
                f"functions of them, not a {what}: {where!r}"
            )
    return Predicate(where, json.dumps(expr))


def _unknown_columns(expr: Any, columns: Sequence[str]) -> list[str]:
    known = {c.lower() for c in columns} | {VIEW}
    return sorted({c for c in _column_refs(expr) if c.lower() not in known})


def _refusal(exc: duckdb.Error, where: str, expr: Any, columns: Sequence[str]) -> InvalidPredicate:
    unknown = _unknown_columns(expr, columns)
    if unknown and isinstance(exc, duckdb.BinderException):
        names = ", ".join(c for c in columns if c != POSITION)
        return InvalidPredicate(
            f"the predicate (where) names unknown column(s) {', '.join(unknown)}; "
            f"the table's columns are: {names}"
        )
    return InvalidPredicate(f"the predicate (where) {where!r} failed: {_first_line(exc)}")


def _sandbox(rows: pa.Table) -> duckdb.DuckDBPyConnection:
    con = sql_sandbox.connect()
    con.register(VIEW, rows)
    return sql_sandbox.lock_down(con)


def check(text: str | Predicate, schema: pa.Schema) -> Predicate:
    """`text` parsed (`parse`), refused unless it binds over `schema`'s columns and is
    boolean: called before anything is written."""
    pred = parse(text)
    where, expr = pred.text, pred.expression
    con = _sandbox(schema.empty_table())
    try:
        try:
            desc = con.execute(_query(where, f"({where}\n) AS p")).description or []
        except duckdb.Error as exc:
            raise _refusal(exc, where, expr, schema.names) from None
    finally:
        con.close()
    kind = str(desc[0][1]) if desc else ""
    if kind not in ("BOOLEAN", '"NULL"', "NULL"):
        raise InvalidPredicate(
            f"the predicate (where) {where!r} is {kind or 'not a value'}, not a boolean "
            "expression (e.g. a comparison such as v = 1)"
        )
    return pred


def matches(data: pa.Table, text: str | Predicate) -> list[int]:
    """Row positions of `data` the predicate selects (null counts as false), evaluated in
    the sandbox over `data` alone."""
    pred = parse(text)
    where, expr = pred.text, pred.expression
    pos = pa.array(range(data.num_rows), pa.int64())
    con = _sandbox(data.append_column(POSITION, pos))
    try:
        try:
            got = con.execute(_query(where, POSITION)).fetchall()
        except duckdb.Error as exc:
            raise _refusal(exc, where, expr, data.column_names) from None
    finally:
        con.close()
    return sorted(int(r[0]) for r in got)


__all__ = ["POSITION", "Predicate", "check", "matches", "parse"]
