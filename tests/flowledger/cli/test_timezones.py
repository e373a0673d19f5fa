"""Times are UTC whatever the process's TZ: the conversion helper, event
times before and after rollover, and TIMESTAMPTZ values in SQL, run in a child process whose
TZ is not UTC (a whole-hour offset and a half-hour one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from storage.timeutil import datetime_to_ms, iso_to_ms, ms_to_datetime, ms_to_iso, to_ms
from tests.support.paths import REPO_ROOT

MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z

CHILD = textwrap.dedent(
    """
    import json, sys
    from provenance import ProvenanceEvent, ProvenanceRepository, ProvenanceSettings
    from storage import open_store

    root, cache, ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    settings = ProvenanceSettings(cache_dir=cache)
    repo = ProvenanceRepository.open(open_store(root), settings)
    repo.register_event(
        ProvenanceEvent(
            event_type="CREATE", flowfile_uuid="00000000-0000-0000-0000-000000000001",
            component_id="c", component_type="t", event_time=ms, lineage_start_date=ms, file_size=1,
        ),
        sync=True,
    )
    out = {"journal": [repo.get_event(0).event_time, repo.get_event(0).lineage_start_date]}
    repo.rollover()
    e = repo.get_events(0, 10)[0]
    out["merged"] = [e.event_time, e.lineage_start_date]
    _, rows = repo.sql("select epoch_ms(event_time), now() is not null, "
                       "epoch_ms(TIMESTAMPTZ '2023-11-14 22:13:20+00') from provenance")
    _, now = repo.sql("select now(), TIMESTAMPTZ '2023-11-14 22:13:20+00'")  # needs pytz
    assert now[0][1].timestamp() * 1000 == ms, now
    out["sql"] = [rows[0][0], rows[0][1], rows[0][2]]
    repo.close()
    print(json.dumps(out))
    """
)


@pytest.mark.unit
@pytest.mark.parametrize("tz", ["America/New_York", "Asia/Kolkata"])
def test_event_times_do_not_shift_outside_utc(tz: str, tmp_path: Path) -> None:
    env = {**os.environ, "TZ": tz, "PYTHONPATH": str(REPO_ROOT)}
    root = "file://" + str(tmp_path / "repo")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, root, str(tmp_path / "cache"), str(MS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["journal"] == [MS, MS]  # before rollover (Arrow journal)
    assert out["merged"] == [MS, MS]  # after rollover (Parquet file)
    assert out["sql"] == [MS, True, MS]  # DuckDB view and TIMESTAMPTZ values


@pytest.mark.unit
def test_conversion_helper_is_utc_under_any_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        naive = datetime(2023, 11, 14, 22, 13, 20)
        assert datetime_to_ms(naive) == MS
        assert datetime_to_ms(naive.replace(tzinfo=UTC)) == MS
        ist = timezone(timedelta(hours=5, minutes=30))
        assert datetime_to_ms(datetime(2023, 11, 15, 3, 43, 20, tzinfo=ist)) == MS
        assert ms_to_datetime(MS) == naive.replace(tzinfo=UTC)
        assert to_ms(MS + 1) == MS + 1 and to_ms(None) is None
        assert iso_to_ms("2023-11-14T22:13:20") == MS == iso_to_ms("2023-11-14T22:13:20Z")
        assert ms_to_iso(MS + 7) == "2023-11-14T22:13:20.007+00:00"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.unit
def test_cli_sql_returns_timestamptz_values_in_utc(tmp_path: Path) -> None:
    """`provenance sql "select now()"` needed pytz (a traceback before); values are UTC."""
    env = {
        **os.environ,
        "TZ": "Asia/Kolkata",
        "FLOWLEDGER_REPO": "file://" + str(tmp_path / "repo"),
        "PYTHONPATH": str(REPO_ROOT),
    }
    query = "select now() as n, TIMESTAMPTZ '2023-11-14 22:13:20+00' as t"
    proc = subprocess.run(
        [sys.executable, "-m", "flowledger", "provenance", "sql", query, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)[0]
    assert datetime.fromisoformat(row["t"]) == ms_to_datetime(MS)
    assert datetime.fromisoformat(row["n"]).utcoffset() == timedelta(0)
