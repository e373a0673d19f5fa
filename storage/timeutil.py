"""The one conversion between epoch milliseconds and datetimes, for the whole project.

Times are UTC end to end. A naive datetime (what pyarrow returns for `timestamp('ms')` without
a zone, and what DuckDB returns for TIMESTAMP) means UTC here, never the process's local zone:
`datetime.timestamp()` on a naive value would use `TZ` and shift every event by the offset.
Integer arithmetic, so no millisecond is lost to float rounding.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def now_ms() -> int:
    """Milliseconds since the epoch, now (time.time() is UTC whatever TZ says)."""
    return time.time_ns() // 1_000_000


def ms_to_datetime(ms: int) -> datetime:
    """An aware UTC datetime for epoch milliseconds."""
    return EPOCH + timedelta(milliseconds=int(ms))


def datetime_to_ms(dt: datetime) -> int:
    """Epoch milliseconds of a datetime; a naive datetime is taken as UTC."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - EPOCH) // _MS


def to_ms(value: datetime | int | None) -> int | None:
    """Epoch milliseconds of a datetime or an int (already ms); None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return datetime_to_ms(value)
    return int(value)


def iso_to_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 time; without an offset it is UTC ('Z' accepted)."""
    return datetime_to_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


def ms_to_iso(ms: int) -> str:
    """ISO-8601 in UTC with milliseconds, e.g. 2023-11-14T22:13:20.000+00:00."""
    return ms_to_datetime(ms).isoformat(timespec="milliseconds")
