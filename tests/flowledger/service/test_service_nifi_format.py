"""NiFi's text formats (flowledger/service/nifi_format.py) against the values NiFi writes:
`FormatUtils.formatDataSize` ("more than one" of a unit), its timestamp adapters, and the
request dates and data sizes NiFi's UI and clients send."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowledger.service import nifi_format as fmt
from flowledger.service.models import ProvenanceRequest

pytestmark = pytest.mark.unit

T = int(datetime(2026, 11, 25, 20, 5, 33, 123_000, tzinfo=UTC).timestamp() * 1000)


def test_sizes_as_nifi_formats_them() -> None:
    assert [fmt.data_size(n) for n in (0, 19, 1023, 1024, 1025, 1536, 1048576)] == [
        "0 bytes", "19 bytes", "1,023 bytes", "1,024 bytes", "1 KB", "1.5 KB", "1,024 KB",
    ]  # fmt: skip
    assert fmt.data_size(5 * 1024**4) == "5 TB" and fmt.data_size(None) is None
    assert fmt.count(1234567) == "1,234,567"


def test_times_as_nifi_formats_them() -> None:
    assert fmt.timestamp(T) == "11/25/2026 20:05:33.123 UTC"
    assert fmt.time_of_day(T) == "20:05:33 UTC"
    assert fmt.iso(T) == "2026-11-25T20:05:33.123+00:00"
    assert fmt.date_time(datetime(2026, 11, 25, 20, 5, 33, tzinfo=UTC)) == "11/25/2026 20:05:33 UTC"


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("11/25/2026 20:05:33 UTC", "2026-11-25T20:05:33"),
        ("11/25/2026 20:05:33 GMT", "2026-11-25T20:05:33"),
        ("11/25/2026 20:05:33", "2026-11-25T20:05:33"),
        ("11/25/2026 20:05:33.250 UTC", "2026-11-25T20:05:33.250"),
        ("11/25/2026 15:05:33 EST", "2026-11-25T20:05:33"),
        ("11/25/2026 21:05:33 Europe/Paris", "2026-11-25T20:05:33"),
        ("11/25/2026 21:05:33 +01:00", "2026-11-25T20:05:33"),
        ("2026-11-25T20:05:33", "2026-11-25T20:05:33"),
        ("2026-11-25T22:05:33+02:00", "2026-11-25T20:05:33"),
    ],
)
def test_request_dates_nifi_or_iso(text: str, utc: str) -> None:
    parsed = fmt.parse_date(text)
    assert parsed.tzinfo is not None and parsed.utcoffset() is not None
    assert parsed.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="auto").startswith(utc)


@pytest.mark.parametrize(
    "text",
    [
        "25/11/2026 20:05:33 UTC",
        "11/25/2026 20:05:33 Mars/Olympus",
        "12/31/9999 23:59:59 -14:00",
        "now",
    ],
)
def test_bad_request_dates_are_validation_errors(text: str) -> None:
    with pytest.raises(ValueError):
        ProvenanceRequest.model_validate({"startDate": text})


def test_request_sizes_bytes_or_data_units() -> None:
    req = ProvenanceRequest.model_validate(
        {"minimumFileSize": "1 KB", "maximumFileSize": "1.5 MB", "summarize": True}
    )
    assert (req.minimumFileSize, req.maximumFileSize) == (1024, 1536 * 1024)
    assert ProvenanceRequest.model_validate({"minimumFileSize": 7}).minimumFileSize == 7
    assert fmt.parse_data_size("10 bytes") == 10 and fmt.parse_data_size("2tb") == 2 * 1024**4
    for bad in ("1 XB", "-1 MB", "MB", "99999999999 TB"):
        with pytest.raises(ValueError):
            ProvenanceRequest.model_validate({"minimumFileSize": bad})
