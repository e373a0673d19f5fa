"""NiFi's text formats for times, data sizes and counts, as its REST API writes and reads them.

NiFi's DTOs carry dates as text in the server's time zone: `MM/dd/yyyy HH:mm:ss.SSS z` for
timestamps (event time, submission, expiration, lineage nodes and links), `MM/dd/yyyy HH:mm:ss z`
for the dates of a search request and `HH:mm:ss z` for `generated`. flowledger's zone is UTC.
Sizes are `FormatUtils.formatDataSize` ("1.5 KB", "512 bytes") and requests give them as
`DataUnit` text ("1 MB", "10 KB", "100 B"); counts are grouped ("1,000").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from types import MappingProxyType
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: Abbreviations Java's `z` pattern writes for common zones; any IANA name works as well.
_ZONE_ABBREVIATIONS = MappingProxyType(
    {
        "UTC": "UTC",
        "GMT": "UTC",
        "Z": "UTC",
        "EST": "America/New_York",
        "EDT": "America/New_York",
        "CST": "America/Chicago",
        "CDT": "America/Chicago",
        "MST": "America/Denver",
        "MDT": "America/Denver",
        "PST": "America/Los_Angeles",
        "PDT": "America/Los_Angeles",
        "CET": "Europe/Paris",
        "CEST": "Europe/Paris",
        "JST": "Asia/Tokyo",
    }
)
_NIFI_DATE = re.compile(
    r"^(\d{2})/(\d{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(?: (\S+))?$"
)
_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{2}):?(\d{2})$")
_DATA_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|BYTES?|KB|MB|GB|TB)?\s*$", re.IGNORECASE)
_UNITS = MappingProxyType({"B": 0, "BYTE": 0, "BYTES": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4})


def _utc(ms: int | None) -> datetime | None:
    """A UTC time, or None when `ms` lies outside years 1-9999 (a forged or corrupt value)."""
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def timestamp(ms: int | None) -> str | None:
    """NiFi's `TimestampAdapter`: `11/25/2026 20:05:33.123 UTC`."""
    t = _utc(ms)
    if t is None:
        return None
    return t.strftime("%m/%d/%Y %H:%M:%S.") + f"{t.microsecond // 1000:03d} UTC"


def date_time(when: datetime | None) -> str | None:
    """NiFi's `DateTimeAdapter` (search request dates): `11/25/2026 20:05:33 UTC`."""
    if when is None:
        return None
    return when.astimezone(UTC).strftime("%m/%d/%Y %H:%M:%S UTC")


def time_of_day(ms: int) -> str:
    """NiFi's `TimeAdapter` (`generated`): `20:05:33 UTC`."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S UTC")


def iso(ms: int | None) -> str | None:
    """ISO-8601 with milliseconds, UTC (NiFi's `eventTimestamp`)."""
    t = _utc(ms)
    return None if t is None else t.isoformat(timespec="milliseconds")


def _zone(name: str) -> tzinfo:
    m = _OFFSET.match(name)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return timezone(sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    try:
        return ZoneInfo(_ZONE_ABBREVIATIONS.get(name.upper(), name))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name[:40]!r}") from exc


def parse_date(value: str) -> datetime:
    """A request date: NiFi's `MM/dd/yyyy HH:mm:ss z` (milliseconds and zone optional; no
    zone is UTC) or ISO-8601 (UTC when it has no offset)."""
    try:
        return _parse_date(value.strip())
    except OverflowError as exc:  # e.g. 12/31/9999 23:59:59 -14:00 is past year 9999 in UTC
        raise ValueError(f"{value[:60]!r} is out of the range of dates") from exc


def _parse_date(text: str) -> datetime:
    m = _NIFI_DATE.match(text)
    if m:
        month, day, year, hour, minute, second, millis, zone = m.groups()
        ms = int((millis or "0").ljust(3, "0"))
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), ms * 1000
        )
        return local.replace(tzinfo=_zone(zone) if zone else UTC).astimezone(UTC)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(
            f"{text[:60]!r} is not a date: use NiFi's MM/dd/yyyy HH:mm:ss z "
            "(e.g. 11/25/2026 20:05:33 UTC) or ISO-8601"
        ) from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def data_size(size: float | None) -> str | None:
    """NiFi's `FormatUtils.formatDataSize`: the largest unit the size is more than one of,
    at most two decimals, grouped digits ("1,023.5 KB", "1 MB" is "1,024 KB", "10 bytes")."""
    if size is None:
        return None
    for unit, power in (("TB", 4), ("GB", 3), ("MB", 2), ("KB", 1)):
        scaled = size / 1024**power
        if scaled > 1:
            return _number(scaled) + " " + unit
    return _number(size) + " bytes"


def _number(value: float) -> str:
    """Java's `NumberFormat` with two fraction digits at most (HALF_EVEN), grouped."""
    text = f"{round(value, 2):,.2f}".rstrip("0").rstrip(".")
    return text


def parse_data_size(value: int | str) -> int:
    """A request size: bytes as a number, or NiFi's `DataUnit` text ("1 MB", "1.5 KB", "100 B";
    units of 1024)."""
    if isinstance(value, int):
        return value
    m = _DATA_SIZE.match(value)
    if not m:
        raise ValueError(
            f"{value[:40]!r} is not a data size: use bytes or a number with B, KB, MB, GB or TB "
            "(e.g. 1 MB)"
        )
    amount, unit = float(m.group(1)), (m.group(2) or "B").upper()
    return int(amount * 1024 ** _UNITS[unit])


def count(n: int) -> str:
    """NiFi's `FormatUtils.formatCount`: grouped digits."""
    return f"{n:,}"
