"""`flowledger timeline ...` and `flowledger table ...` (typer's runner, in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flowledger.cli import app

pytestmark = pytest.mark.unit
runner = CliRunner()


def _run(*args: str, ok: bool = True) -> str:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result.output


def test_table_write_read_and_timeline_commands(tmp_path: Path) -> None:
    uri = str(tmp_path / "repo" / "tables" / "t1")
    csv = tmp_path / "a.csv"
    csv.write_text("id,p\n1,a\n2,b\n3,a\n")
    pq.write_table(pa.table({"id": [10, 11], "p": ["c", "c"]}), tmp_path / "b.parquet")

    first = json.loads(_run("table", "write", uri, str(csv), "--partition-by", "p", "--json"))
    assert first["action"] == "commit" and first["completion_order"] == 1
    second = json.loads(_run("table", "write", uri, str(tmp_path / "b.parquet"), "--json"))
    assert json.loads(_run("table", "read", uri, "--count", "--json"))["rows"] == 5
    assert _run("table", "read", uri, "--count", "--as-of", first["instant_time"]).strip() == "3"
    rows = json.loads(_run("table", "read", uri, "--json"))["data"]
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 10, 11]

    shown = json.loads(_run("timeline", "show", "--table", uri, "--json"))
    assert [r["instant_time"] for r in shown] == [first["instant_time"], second["instant_time"]]
    assert shown[0]["files_added"] == 2 and shown[0]["rows"] == 3
    assert shown[1]["completion_order"] == 2 and shown[1]["state"] == "completed"
    assert first["instant_time"] in _run("timeline", "show", "--table", uri)

    sp = json.loads(_run("timeline", "savepoint", first["instant_time"], "--table", uri, "--json"))
    assert sp["action"] == "savepoint"
    _run("table", "write", uri, str(csv), "--mode", "overwrite")
    assert json.loads(_run("table", "read", uri, "--count", "--json"))["rows"] == 3
    restored = json.loads(
        _run("timeline", "restore", first["instant_time"], "--table", uri, "--json")
    )
    assert restored["action"] == "restore"
    assert _run("table", "read", uri, "--count").strip() == "3"
    last = json.loads(_run("table", "write", uri, str(csv), "--json"))
    rb = json.loads(_run("timeline", "rollback", last["instant_time"], "--table", uri, "--json"))
    assert rb["action"] == "rollback"
    assert "nothing to clean" in _run("timeline", "clean", "--table", uri)


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    result = runner.invoke(app, ["timeline", "rollback", "20200101000000000", "--table", uri])
    assert result.exit_code != 0 and "no table at" in str(result.exception)
    pq.write_table(pa.table({"id": [1]}), tmp_path / "a.parquet")
    _run("table", "write", uri, str(tmp_path / "a.parquet"))
    result = runner.invoke(app, ["timeline", "rollback", "20200101000000000", "--table", uri])
    assert result.exit_code != 0
    assert "no write instant 20200101000000000" in str(result.exception)
    result = runner.invoke(app, ["timeline", "show"])
    assert result.exit_code != 0 and "--table" in str(result.exception)
