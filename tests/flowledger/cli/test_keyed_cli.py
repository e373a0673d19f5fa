"""`flowledger table create / write --operation / read --changes-since [--cdc]` on a keyed
table, and the one-line refusal to change a table's key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app

pytestmark = pytest.mark.unit
runner = CliRunner()


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _json(*args: str) -> Any:
    return json.loads(_ok(*args, "--json"))


def _csv(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_keyed_table_from_the_command_line(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    created = _json(
        "table",
        "create",
        uri,
        "--record-key",
        "id",
        "--ordering-field",
        "ts",
        "--partition-by",
        "p",
        "--merge-mode",
        "event_time",
    )
    assert created["record_key"] == ["id"] and created["merge_mode"] == "event_time"
    again = runner.invoke(app, ["table", "create", uri, "--record-key", "id,v"])
    assert again.exit_code != 0  # the error main() prints as one line on stderr
    message = str(again.exception)
    assert "\n" not in message and "cannot change to record key id,v" in message

    a = _csv(tmp_path / "a.csv", "id,ts,p,v\n1,1,a,x\n2,1,b,y\n2,2,b,y2\n")
    first = _json("table", "write", uri, a, "--operation", "upsert")["instant_time"]
    b = _csv(tmp_path / "b.csv", "id,ts,p,v\n1,0,a,old\n3,1,a,z\n")
    _json("table", "write", uri, b, "--operation", "upsert")
    d = _csv(tmp_path / "d.csv", "id\n2\n9\n")
    _json("table", "write", uri, d, "--operation", "delete")
    rows = _json("table", "read", uri)["data"]
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "x"), (3, "z")]  # 1: older ts lost
    assert all(r["_flowledger_commit_time"] and r["_flowledger_record_key"] for r in rows)

    changed = _json("table", "read", uri, "--changes-since", first)["data"]
    assert [r["id"] for r in changed] == [3]
    cdc = _json("table", "read", uri, "--changes-since", first, "--cdc")["data"]
    assert [(c["op"], c["record_key"]) for c in cdc] == [("i", "3"), ("d", "2")]
    assert cdc[1]["before"]["v"] == "y2" and cdc[1]["after"] is None

    _json("table", "write", uri, "--operation", "delete", "--where", "v = 'z'")
    assert _json("table", "read", uri, "--count")["rows"] == 1
    dup = runner.invoke(app, ["table", "write", uri, a, "--operation", "insert"])
    assert dup.exit_code != 0 and "already in the table" in str(dup.exception)


def test_unkeyed_table_refuses_keyed_operations(tmp_path: Path) -> None:
    uri = str(tmp_path / "plain")
    a = _csv(tmp_path / "a.csv", "id\n1\n")
    _ok("table", "write", uri, a)
    result = runner.invoke(app, ["table", "write", uri, a, "--operation", "upsert"])
    assert result.exit_code != 0 and "needs a keyed table" in str(result.exception)


def test_merge_on_read_table_from_the_command_line(tmp_path: Path, monkeypatch: Any) -> None:
    uri = str(tmp_path / "mor")
    monkeypatch.setenv("FLOWLEDGER_AUTO_ARCHIVE", "0")
    _json("table", "create", uri, "--record-key", "id", "--table-type", "merge_on_read")
    a = _csv(tmp_path / "a.csv", "id,v\n1,x\n2,y\n")
    _json("table", "write", uri, a, "--operation", "upsert")
    b = _csv(tmp_path / "b.csv", "id,v\n1,x2\n")
    done = _json("table", "write", uri, b, "--operation", "upsert")
    assert done["action"] == "deltacommit"
    rows = _json("table", "read", uri)["data"]
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "x2"), (2, "y")]
    ro = _json("table", "read", uri, "--read-optimized")["data"]
    assert sorted((r["id"], r["v"]) for r in ro) == [(1, "x"), (2, "y")]
    assert _json("timeline", "compact", "--table", uri, "--schedule-only")["scheduled"]
    assert len(_json("timeline", "compact", "--table", uri)["compacted"]) == 1
    ro = _json("table", "read", uri, "--read-optimized")["data"]
    assert sorted((r["id"], r["v"]) for r in ro) == [(1, "x2"), (2, "y")]
    shown = [(r["action"], r.get("operation")) for r in _json("timeline", "show", "--table", uri)]
    assert ("commit", "compact") in shown


def test_create_reports_the_partition_naming_the_table_has(tmp_path: Path) -> None:
    """A new table escapes partition values; creating an older table again reports the
    naming it keeps (its properties were written before the naming was recorded)."""
    from storage import open_store, seal_json
    from timeline.keyed.properties import PROPERTIES_KEY

    args = ("--record-key", "id", "--partition-by", "p")
    new = _json("table", "create", str(tmp_path / "new"), *args)
    assert new["partition_naming"] == "hive"
    old = open_store(str(tmp_path / "old"))
    body = {k: v for k, v in new.items() if k not in ("table", "partition_naming")}
    old.put(PROPERTIES_KEY, seal_json({"format": "flowledger.table-properties/1", **body}))
    assert _json("table", "create", str(tmp_path / "old"), *args)["partition_naming"] == "legacy"


def test_an_unknown_operation_is_refused_in_one_line(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    a = _csv(tmp_path / "a.csv", "id,v\n1,x\n")
    _ok("table", "create", uri, "--record-key", "id")
    result = runner.invoke(app, ["table", "write", uri, a, "--operation", "merge"])
    assert result.exit_code != 0
    assert "--operation must be one of upsert, insert, delete, not 'merge'" in str(result.exception)
    _ok("table", "write", uri, a, "--operation", "UPSERT")  # the names, in any case
    assert [(r["id"], r["v"]) for r in _json("table", "read", uri)["data"]] == [(1, "x")]


@pytest.mark.parametrize(
    ("option", "value", "offered"),
    [
        ("--table-type", "mor", "copy_on_write, merge_on_read"),
        ("--merge-mode", "latest", "commit_time, event_time"),
        ("--key-scope", "table", "global, partition"),
    ],
)
def test_an_unknown_table_option_is_refused_in_one_line(
    tmp_path: Path, option: str, value: str, offered: str
) -> None:
    uri = str(tmp_path / "t")
    result = runner.invoke(app, ["table", "create", uri, "--record-key", "id", option, value])
    assert result.exit_code != 0
    assert str(result.exception) == f"{option} must be one of {offered}, not {value!r}"
    assert not (tmp_path / "t").exists()  # refused before anything was written
    _ok("table", "create", uri, "--record-key", "id", "--table-type", "MERGE_ON_READ")
    assert _json("table", "create", uri, "--record-key", "id", "--table-type",
                 "merge_on_read")["table_type"] == "merge_on_read"  # fmt: skip


def test_the_keyed_index_is_chosen_per_write(tmp_path: Path, monkeypatch: Any) -> None:
    """`table write --operation ... --keyed-index NAME` writes through a table opened with
    that `keyed_index` setting; another name is refused in one line before anything is
    written, and the option means nothing to a plain write."""
    from timeline import KeyedIndex, Table

    seen: list[KeyedIndex] = []
    upsert = Table.upsert

    def spy(self: Table, *args: Any, **kwargs: Any) -> Any:
        seen.append(self.settings.keyed_index)
        return upsert(self, *args, **kwargs)

    monkeypatch.setattr(Table, "upsert", spy)
    uri = str(tmp_path / "t")
    _ok("table", "create", uri, "--record-key", "id")
    a = _csv(tmp_path / "a.csv", "id,v\n1,x\n")
    _ok("table", "write", uri, a, "--operation", "upsert", "--keyed-index", "RANGE_BLOOM")
    _ok("table", "write", uri, a, "--operation", "upsert")
    assert seen == [KeyedIndex.RANGE_BLOOM, KeyedIndex.AUTO]
    bad = runner.invoke(app, ["table", "write", uri, a, "--operation", "upsert",
                              "--keyed-index", "hash"])  # fmt: skip
    assert bad.exit_code != 0
    assert str(bad.exception) == (
        "--keyed-index must be one of auto, range_bloom, record_level, not 'hash'"
    )
    plain = runner.invoke(app, ["table", "write", uri, a, "--keyed-index", "auto"])
    assert plain.exit_code != 0 and "applies to a keyed write" in str(plain.exception)
    assert len(seen) == 2 and _json("table", "read", uri, "--count")["rows"] == 1
