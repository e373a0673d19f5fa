"""A read command's answer is whole or says it is not: `--json` holds every row unless a limit
was typed (`table read --limit N|all`, `provenance events --max N|all`), the table printed for a
person says "showing N of M"; an empty read keeps the table's columns; a refused point in time
names the option it was given to. The CLI's real entry point (`flowledger.cli.main`) runs in
process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import open_store
from tests.support.cli import run_cli
from timeline import Table
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit

ROWS = 45  # more than the 20 a person is shown


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLOWLEDGER_AUTO_ARCHIVE", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")  # one caption line


_cli = run_cli


def _ok(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    rc, out, err = _cli(monkeypatch, capsys, *args)
    assert rc == 0, err
    return out


def _json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    return json.loads(_ok(monkeypatch, capsys, *args, "--json"))


def _keyed(tmp_path: Path, table_type: str = "copy_on_write") -> tuple[str, Table, str]:
    uri = str(tmp_path / "repo" / "tables" / "t")
    t = Table.create(
        open_store(uri), KeyedProperties.of("id", partition_by=["p"], table_type=table_type)
    )
    first = t.upsert(pa.table({"id": [0], "p": ["a"], "v": [0.0]}))
    ids = list(range(1, ROWS))
    t.upsert(
        pa.table({"id": ids, "p": ["a" if i % 2 else "b" for i in ids], "v": [i / 2 for i in ids]})
    )
    return uri, t, first.time


def test_table_read_json_holds_every_row_unless_limited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, _, first = _keyed(tmp_path)
    whole = _json(monkeypatch, capsys, "table", "read", uri)
    assert (whole["rows"], whole["truncated"], len(whole["data"])) == (ROWS, False, ROWS)
    assert sorted(r["id"] for r in whole["data"]) == list(range(ROWS))
    assert {"name": "v", "type": "double"} in whole["columns"]
    changed = _json(monkeypatch, capsys, "table", "read", uri, "--changes-since", first)
    assert (changed["rows"], len(changed["data"]), changed["truncated"]) == (
        ROWS - 1,
        ROWS - 1,
        False,
    )

    cut = _json(monkeypatch, capsys, "table", "read", uri, "--limit", "3")
    assert (cut["rows"], cut["truncated"], len(cut["data"])) == (ROWS, True, 3)
    assert _json(monkeypatch, capsys, "table", "read", uri, "--limit", "all") == whole
    none = _json(monkeypatch, capsys, "table", "read", uri, "--limit", "0")
    assert (none["rows"], none["truncated"], none["data"]) == (ROWS, True, [])
    assert none["columns"] == whole["columns"]

    rc, _, err = _cli(monkeypatch, capsys, "table", "read", uri, "--limit", "-1")
    assert rc == 2 and "--limit" in err and "'all'" in err


def test_the_printed_table_says_when_it_shows_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, _, _ = _keyed(tmp_path)
    assert f"showing 20 of {ROWS} rows" in _ok(monkeypatch, capsys, "table", "read", uri)
    assert "showing 5 of" in _ok(monkeypatch, capsys, "table", "read", uri, "--limit", "5")
    every = _ok(monkeypatch, capsys, "table", "read", uri, "--limit", "all")
    assert "showing" not in every and f"{ROWS} rows" in every


def _events(path: Path, n: int) -> Path:
    line = {
        "event_type": "CREATE",
        "flowfile_uuid": "f",
        "component_id": "c",
        "component_type": "GenerateFlowFile",
        "file_size": 1,
        "event_time": 1000,
    }
    path.write_text(
        "".join(json.dumps({**line, "flowfile_uuid": f"f{i}"}) + "\n" for i in range(n))
    )
    return path


def test_provenance_events_json_holds_every_event_unless_max(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = str(tmp_path / "repo")
    _ok(
        monkeypatch,
        capsys,
        "provenance",
        "ingest",
        str(_events(tmp_path / "e.jsonl", 130)),
        "--repo",
        repo,
    )
    every = _json(monkeypatch, capsys, "provenance", "events", "--repo", repo)
    assert [e["event_id"] for e in every] == list(range(130))  # beyond the 100 printed
    few = _json(monkeypatch, capsys, "provenance", "events", "--repo", repo, "--max", "7")
    assert [e["event_id"] for e in few] == list(range(7))
    printed = _ok(monkeypatch, capsys, "provenance", "events", "--repo", repo)
    assert "showing 100 events from id 0; more follow" in printed and "--first 100" in printed
    printed = _ok(monkeypatch, capsys, "provenance", "events", "--repo", repo, "--max", "all")
    assert "more follow" not in printed and "129" in printed
    rc, _, err = _cli(monkeypatch, capsys, "provenance", "events", "--repo", repo, "--max", "0")
    assert rc == 2 and "--max" in err


def test_a_refused_point_in_time_names_its_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, _, _ = _keyed(tmp_path)
    for option in ("--changes-since", "--as-of"):
        for cmd in (
            ("table", "read", uri),
            ("table", "sql", uri, "SELECT 1", "--repo", str(tmp_path / "repo")),
        ):
            rc, out, err = _cli(monkeypatch, capsys, *cmd, option, "yesterday")
            assert (rc, out) == (2, ""), err
            assert err.startswith(f"flowledger: error: invalid {option} 'yesterday'"), err
            assert "yyyyMMddHHmmssSSS" in err and "ISO 8601" in err and len(err.splitlines()) == 1
    # The same forms as --as-of are accepted: a date is its midnight, UTC.
    assert (
        _json(monkeypatch, capsys, "table", "read", uri, "--changes-since", "2000-01-01")["rows"]
        == ROWS
    )


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_an_empty_read_keeps_the_columns(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    table_type: str,
) -> None:
    uri, t, _ = _keyed(tmp_path, table_type)
    t.delete_partition(["p=a", "p=b"])  # no file left in the snapshot
    got = _json(monkeypatch, capsys, "table", "read", uri)
    assert (got["rows"], got["data"], got["truncated"]) == (0, [], False)
    assert [c["name"] for c in got["columns"]][-3:] == ["id", "p", "v"]
    assert {"name": "id", "type": "int64"} in got["columns"]
    printed = _ok(monkeypatch, capsys, "table", "read", uri)
    assert "id" in printed and "0 rows" in printed
    repo = str(tmp_path / "repo")
    query = "SELECT id, v FROM t"
    assert _json(monkeypatch, capsys, "table", "sql", uri, query, "--repo", repo) == []
