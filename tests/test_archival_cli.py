"""`flowledger timeline archive` and `flowledger timeline show --archived` (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from storage import StoreSettings, open_store
from timeline import Table
from timeline.archive import load_active

pytestmark = pytest.mark.unit
runner = CliRunner()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_archive_and_show_archived(tmp_path: Path) -> None:
    uri = str(tmp_path / "repo" / "tables" / "t1")
    table = Table.open(open_store(uri, StoreSettings(fsync=False)))
    times = [table.write(pa.table({"id": [k]})).time for k in range(6)]
    limits = ("--keep-min-commits", "2", "--keep-max-commits", "3")
    dry = json.loads(_run("timeline", "archive", "--table", uri, *limits, "--dry-run", "--json"))
    assert len(dry["would_archive"]) == 4
    out = json.loads(_run("timeline", "archive", "--table", uri, *limits, "--json"))
    assert [n.split(".")[0] for n in out["archived"]] == times[:4]
    assert out["archive_files"] == 1 and out["archive_file"].endswith(".avro")
    rows = json.loads(_run("timeline", "show", "--table", uri, "--archived", "--json"))
    assert [r["instant_time"] for r in rows] == times
    assert [r["timeline"] for r in rows] == ["archived"] * 4 + ["active"] * 2
    assert rows[0]["rows"] == 1 and rows[0]["completion_order"] == 1
    # (plain `timeline show` uses the table loader, manifest-aware once integrated)
    assert [i.time for i in load_active(table.tl).timeline] == times[4:]
    text = _run("timeline", "archive", "--table", uri, *limits)
    assert "nothing to archive" in text
    assert "archived" in _run("timeline", "show", "--table", uri, "--archived")


def test_corrupt_archive_is_one_line_error(tmp_path: Path) -> None:
    uri = str(tmp_path / "repo" / "tables" / "t1")
    store = open_store(uri, StoreSettings(fsync=False))
    table = Table.open(store)
    for k in range(5):
        table.write(pa.table({"id": [k]}))
    out = json.loads(
        _run(
            "timeline",
            "archive",
            "--table",
            uri,
            "--keep-min-commits",
            "1",
            "--keep-max-commits",
            "2",
            "--json",
        )
    )
    name = out["archive_file"].rsplit("/", 1)[-1]
    key = next(o.key for o in store.list("_timeline/archive/") if o.key.endswith(name))
    store.put(key, b"garbage")
    result = runner.invoke(app, ["timeline", "show", "--table", uri, "--archived"])
    assert result.exit_code != 0
    assert name in str(result.exception) or name in result.output
