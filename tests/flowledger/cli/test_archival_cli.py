"""`flowledger timeline archive` and `flowledger timeline show --archived` (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.context import CliContext
from flowledger.pipeline.tables import Tables
from flowledger.spark import CommitRecorder
from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.archive import ArchivalSettings, load_active

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


def _csv(tmp_path: Path, k: int) -> str:
    path = tmp_path / f"rows{k}.csv"
    path.write_text(f"id\n{k}\n")
    return str(path)


def test_automatic_archival_is_on_by_default_and_the_cli_can_turn_it_off(tmp_path: Path) -> None:
    from timeline.archive import read_manifest

    on = str(tmp_path / "repo" / "tables" / "on")
    off = str(tmp_path / "repo" / "tables" / "off")
    for k in range(31):  # one past Hudi's keep_max_commits=30
        # alternating in one process: the switch lasts for its own invocation only
        _run("table", "write", on, _csv(tmp_path, k))
        _run("--no-auto-archive", "table", "write", off, _csv(tmp_path, k))
    m_on = read_manifest(open_store(on))
    assert m_on.instant_count == 11  # down to keep_min_commits=20
    assert len(load_active(Table(open_store(on)).tl).timeline) == 20
    assert read_manifest(open_store(off)).instant_count == 0
    assert len(load_active(Table(open_store(off)).tl).timeline) == 31
    # every commit stays readable after archival
    assert json.loads(_run("table", "read", on, "--count", "--json"))["rows"] == 31


def test_automatic_archival_costs_no_request_when_nothing_is_archived(tmp_path: Path) -> None:
    """Requests of a commit that archives nothing are those of archival off, and archiving
    deletes the completed objects in one batch request."""

    def commits(name: str, settings: ArchivalSettings) -> list[dict[str, int]]:
        store = open_store(str(tmp_path / name), StoreSettings(fsync=False))
        out = []
        for k in range(32):
            store.stats.reset()
            # a fresh table object per commit, as the CLI does
            table = Table.open(store, TableSettings(archival=settings))
            table.write(pa.table({"id": [k]}))
            out.append({o: n for o, n in store.stats.snapshot().items() if o != "PROBE"})
        return out

    on = commits("on", ArchivalSettings())
    off = commits("off", ArchivalSettings(auto_archive=False))
    assert on[:30] == off[:30]  # up to keep_max_commits nothing can be archived: no request
    # the 31st archives 11: completed objects go in batches, not one DELETE each (the
    # single DELETEs are the run's plan and previous checkpoint)
    assert on[30]["DELETE_BATCH"] >= 1 and on[30].get("DELETE", 0) <= 2
    # after archival a write still plans on the listing alone (no manifest read: nothing is
    # pending): archived history costs a commit no request either
    assert on[31] == off[31] and sum(on[31].values()) <= 8


def test_the_switch_reaches_the_pipeline_tables_and_the_spark_recorder(tmp_path: Path) -> None:
    """`--no-auto-archive` travels in the invocation's context to the pipeline's tables and to
    the provenance repositories a Spark commit recorder opens; nothing else changes."""
    uri = str(tmp_path / "repo")
    for on in (False, True):
        cli = CliContext(auto_archive=on)
        table = Tables(uri, open_store(uri), cli.table_settings()).table("flights")
        assert table.settings.archival.auto_archive is on
        with CommitRecorder(provenance=cli.provenance_settings()) as recorder:
            repo = recorder.repository(uri + ("/on" if on else "/off"))
            assert repo.settings.table.archival.auto_archive is on
    assert Tables(uri, open_store(uri)).table("flights").settings.archival.auto_archive
