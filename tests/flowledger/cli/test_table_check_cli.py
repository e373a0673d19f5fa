"""`flowledger table check [--repair] [--json]` (exit 0 for a sound table, 6 while problems
are left), and every read path naming a missing object it needs instead of answering
around it: a merge-on-read table whose properties object is gone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.errors import answer_for
from flowledger.output import one_line
from storage import open_store
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit

SETTINGS = TableSettings(local_entry_cache=False, compaction_mode="off")


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _cli(*args: str) -> Ran:
    """The command in this process, answered as `flowledger.cli.main` answers (the exit code
    of the error's kind, its one-line message on stderr)."""
    result = CliRunner().invoke(app, list(args))
    exc = result.exception
    if exc is None or isinstance(exc, SystemExit):
        return Ran(result.exit_code, result.stdout, "")
    return Ran(answer_for(exc).exit_code, result.stdout, one_line(exc) + "\n")


def _mor(tmp_path: Path) -> Table:
    """4 rows: key 1 updated and key 2 deleted in log files, not in the base file."""
    props = KeyedProperties.of("k", table_type="merge_on_read")
    t = Table.create(open_store(str(tmp_path / "t")), props, SETTINGS)
    t.upsert(pa.table({"k": [1, 2, 3, 4, 5], "v": ["a", "b", "c", "d", "e"]}))
    t.upsert(pa.table({"k": [1], "v": ["new"]}))
    t.delete([2])
    return t


def test_a_lost_properties_object_is_named_by_every_read_path(tmp_path: Path) -> None:
    t = _mor(tmp_path)
    assert sorted(t.read().column("v").to_pylist()) == ["c", "d", "e", "new"]
    props = tmp_path / "t" / "_timeline" / "properties.json"
    props.unlink()
    repo = str(tmp_path / "repo")
    for args in (
        ("table", "sql", t.uri, "SELECT count(*) AS n FROM t", "--repo", repo),
        ("table", "read", t.uri, "--count"),
        ("table", "read", t.uri),
        ("table", "read", t.uri, "--changes-since", "20000101000000000"),
        ("table", "write", t.uri, "--operation", "delete", "--where", "k = 3"),
    ):
        res = _cli(*args)
        assert res.returncode == 6, (args, res.returncode, res.stdout, res.stderr)
        assert "properties.json is missing" in res.stderr, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1

    checked = _cli("table", "check", t.uri)
    assert checked.returncode == 6
    assert "missing_properties" in checked.stdout and "properties.json" in checked.stdout
    repaired = _cli("table", "check", t.uri, "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "repaired: wrote" in repaired.stdout and props.exists()
    res = _cli("table", "read", t.uri, "--count")
    assert res.returncode == 0 and res.stdout.strip() == "4"


def test_check_exit_codes_and_json(tmp_path: Path) -> None:
    t = _mor(tmp_path)
    ok = _cli("table", "check", t.uri)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("snapshots checked)")
    base = t.merge_on_read_slices()[0].base  # type: ignore[index]
    (tmp_path / "t" / base.path).unlink()
    bad = _cli("table", "check", t.uri, "--json")
    assert bad.returncode == 6
    doc = json.loads(bad.stdout)
    assert doc["ok"] is False and doc["problems"][0]["kind"] == "missing"
    assert base.path in doc["problems"][0]["subject"]
    refused = _cli("table", "check", t.uri, "--repair")
    assert refused.returncode == 6 and "not repaired:" in refused.stdout
    assert "restore it from a backup" in refused.stdout
