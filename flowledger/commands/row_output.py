"""How a read command prints rows, and how many (`--limit N|all`, `--max N|all`).

A `--json` answer is whole unless a limit was typed: a script never gets part of the answer
without being told. The `table read --json` document says what it holds:

    {"columns": [{"name": "id", "type": "int64"}, ...],   # the schema, also with no rows
     "rows": 300,            # rows in the answer (as `--count --json` counts them)
     "truncated": false,     # true when --limit left rows out of "data"
     "data": [{"id": 1, ...}, ...]}

The table printed for a person stops at a few rows by default and says so ("showing 20 of
300 rows")."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

from ..output import emit_json, jsonable

#: Rows the table printed for a person shows when no --limit is given.
DISPLAY_ROWS = 20
#: The limit that means "every row".
ALL = "all"


def parse_limit(
    text: str | None, option: str, as_json: bool, *, display: int = DISPLAY_ROWS, minimum: int = 0
) -> int | None:
    """How many rows to output, None for all: what `option` says (a number, or `all`); when
    it was not given, all of them in JSON and `display` rows for a person."""
    if text is None:
        return None if as_json else display
    if text.strip().lower() == ALL:
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not minimum <= n <= 2**31 - 1:
        raise ValueError(f"{option} must be a whole number, {minimum} or more, or {ALL!r}")
    return n


def table_document(data: pa.Table, limit: int | None) -> dict[str, Any]:
    """The `--json` document of a table read: its columns, row count and rows (all of them,
    or the first `limit`)."""
    shown = data if limit is None or limit >= data.num_rows else data.slice(0, limit)
    return {
        "columns": [{"name": f.name, "type": str(f.type)} for f in data.schema],
        "rows": data.num_rows,
        "truncated": shown.num_rows < data.num_rows,
        "data": jsonable(shown.to_pylist()) if shown.num_rows else [],
    }


def print_query_rows(names: list[str], rows: list[tuple[Any, ...]], as_json: bool) -> None:
    """A SQL answer: one JSON object per row, or a table for a person."""
    if as_json:
        emit_json([dict(zip(names, map(jsonable, r), strict=True)) for r in rows])
        return
    out = RichTable(*names)
    for r in rows:
        out.add_row(*(str(v) for v in r))
    Console().print(out)


def print_count(rows: int, as_json: bool, **about: Any) -> None:
    """A `--count` answer: the number alone, or `{"rows": N, **about}` in JSON."""
    if as_json:
        emit_json({"rows": rows, **about})
    else:
        print(rows)


def print_table(data: pa.Table, limit: int | None, as_json: bool, title: str) -> None:
    """A table read's rows, the first `limit` (None: all): the JSON document, or a table for
    a person whose caption says how many rows there are and how many it shows."""
    if as_json:
        emit_json(table_document(data, limit))
        return
    shown = data.to_pylist() if limit is None else data.slice(0, limit).to_pylist()
    caption = f"{title}: {data.num_rows} rows"
    if len(shown) < data.num_rows:
        caption = (
            f"{title}: showing {len(shown)} of {data.num_rows} rows "
            f"(--limit N or --limit {ALL} for more)"
        )
    out = RichTable(*data.column_names, caption=caption)
    for r in shown:
        out.add_row(*(str(v) for v in r.values()))
    Console().print(out)
