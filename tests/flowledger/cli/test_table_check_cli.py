"""`flowledger table check [--repair] [--json]` (exit 0 for a sound table, 6 while problems
are left), and every read path naming a missing object it needs instead of answering
around it: a merge-on-read table whose properties object is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from storage import open_store
from tests.support.cli import Cli
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit

SETTINGS = TableSettings(local_entry_cache=False, compaction_mode="off")


def _mor(tmp_path: Path) -> Table:
    """4 rows: key 1 updated and key 2 deleted in log files, not in the base file."""
    props = KeyedProperties.of("k", table_type="merge_on_read")
    t = Table.create(open_store(str(tmp_path / "t")), props, SETTINGS)
    t.upsert(pa.table({"k": [1, 2, 3, 4, 5], "v": ["a", "b", "c", "d", "e"]}))
    t.upsert(pa.table({"k": [1], "v": ["new"]}))
    t.delete([2])
    return t


def test_a_lost_properties_object_is_named_by_every_read_path(tmp_path: Path, cli: Cli) -> None:
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
        code, out, err = cli(*args)
        assert code == 6, (args, code, out, err)
        assert "properties.json is missing" in err, (args, err)
        assert len(err.strip().splitlines()) == 1

    code, out, _ = cli("table", "check", t.uri)
    assert code == 6
    assert "missing_properties" in out and "properties.json" in out
    code, out, err = cli("table", "check", t.uri, "--repair")
    assert code == 0, out + err
    assert "repaired: wrote" in out and props.exists()
    code, out, _ = cli("table", "read", t.uri, "--count")
    assert code == 0 and out.strip() == "4"


def test_check_exit_codes_and_json(tmp_path: Path, cli: Cli) -> None:
    t = _mor(tmp_path)
    code, out, _ = cli("table", "check", t.uri)
    assert code == 0 and out.strip().endswith("snapshots checked)")
    base = t.snapshot().merge_on_read_slices()[0].base  # type: ignore[index]
    (tmp_path / "t" / base.path).unlink()
    code, out, _ = cli("table", "check", t.uri, "--json")
    assert code == 6
    doc = json.loads(out)
    assert doc["ok"] is False and doc["problems"][0]["kind"] == "missing"
    assert base.path in doc["problems"][0]["subject"]
    code, out, _ = cli("table", "check", t.uri, "--repair")
    assert code == 6 and "not repaired:" in out
    assert "restore it from a backup" in out
