"""Everything the CLI writes for a reader: `--json` documents on stdout (one strict JSON
document per command, the same field names everywhere) and the one-line error on stderr.

Field names shared by every JSON output: an instant is `instant_time`, `action`, `state` and
`completion_order` (its position in the commit log; `seq` in the timeline's code and object
names); events are counted as `events`, files as `files`, bytes as `bytes`; event ids are
`first_event_id` / `last_event_id` (both inclusive); rows are counted as `rows`, and a table
read's rows are `data` beside its `columns` and `truncated` (commands/row_output.py)."""

from __future__ import annotations

import json
import math
import sys
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from timeline import Instant

ERROR_PREFIX = "flowledger: error: "


def _finite(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


def jsonable(v: Any) -> Any:
    """SQL values as JSON values: dates as ISO text, decimals as numbers."""
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    return v


def dumps(value: Any, **kwargs: Any) -> str:
    """`json.dumps` that never writes NaN/Infinity (which no strict JSON parser reads)."""
    kwargs.setdefault("default", str)
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


def emit_json(value: Any) -> None:
    """The command's `--json` result: one strict JSON document on one line of stdout."""
    print(dumps(value))


def instant_json(i: Instant) -> dict[str, Any]:
    """An instant as every command reports it."""
    return {
        "instant_time": i.time,
        "action": i.action,
        "state": i.state.value,
        "completion_order": i.seq,
    }


def one_line(exc: BaseException | str) -> str:
    """A single-line message (newlines and runs of spaces folded)."""
    text = exc if isinstance(exc, str) else (str(exc) or type(exc).__name__)
    return " ".join(text.split())


def error_line(message: BaseException | str, prefix: str = ERROR_PREFIX) -> None:
    """The problem on one line of stderr, in the form scripts and logs can rely on."""
    print(prefix + one_line(message), file=sys.stderr, flush=True)
