"""A SQL answer as JSON, bounded in rows, bytes and time.

The rows come from DuckDB as Arrow record batches (streamed, not materialized), so a batch's
size is known before anything becomes Python objects: an answer over `max_bytes` is refused
before the conversion that would cost several times its size in memory and tens of seconds of
CPU; the deadline is checked after every batch, so the time after DuckDB (which its
`interrupt()` cannot stop) is bounded as well.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pydantic_core

from .dto import jsonable
from .errors import AnswerTooLarge, QueryTimeout

#: Rows per Arrow batch asked from DuckDB (it may hand fewer).
BATCH_ROWS = 2048


def _rows(batch: pa.RecordBatch) -> Iterator[list[Any]]:
    # Column by column: two columns of the same name stay two values.
    columns = [c.to_pylist(maps_as_pydicts="lossy") for c in batch.columns]
    for values in zip(*columns, strict=True):
        yield jsonable(list(values))


def bounded_json(
    reader: pa.RecordBatchReader,
    columns: list[str],
    max_rows: int,
    max_bytes: int,
    deadline: float,
    timeout_s: float,
) -> bytes:
    """`{"columns", "rows", "truncated"}` of at most `max_rows` rows from `reader`; raises
    AnswerTooLarge over `max_bytes` of row data, QueryTimeout past `deadline` (monotonic)."""
    too_large = AnswerTooLarge(
        f"the answer is over the {max_bytes} byte limit (sql_max_answer_bytes): select fewer "
        "or smaller columns, or fewer rows (LIMIT, maxRows)"
    )
    parts: list[bytes] = []
    size = rows = 0
    truncated = False
    for batch in reader:
        if time.monotonic() > deadline:
            raise QueryTimeout(f"query interrupted after the {timeout_s:g} s limit")
        if rows + batch.num_rows > max_rows:
            truncated = True
            batch = batch.slice(0, max_rows - rows)
        if size + batch.nbytes > max_bytes:  # Arrow's size: known before any conversion
            raise too_large
        for row in _rows(batch):
            encoded = pydantic_core.to_json(row)
            size += len(encoded) + 1
            if size > max_bytes:
                raise too_large
            parts.append(encoded)
        rows += batch.num_rows
        if time.monotonic() > deadline:
            raise QueryTimeout(f"query interrupted after the {timeout_s:g} s limit")
        if truncated:
            break
    head = pydantic_core.to_json({"columns": columns})[:-1]
    tail = b'],"truncated":' + (b"true" if truncated else b"false") + b"}"
    return head + b',"rows":[' + b",".join(parts) + tail
