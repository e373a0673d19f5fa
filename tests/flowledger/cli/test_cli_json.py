"""Every read command's `--json`: one strict JSON document on stdout, with the field names all
commands share (flowledger/output.py), and `--repo` before or after the subcommand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from tests.support.provenance_events import fork_flow, write_jsonl

pytestmark = pytest.mark.unit
runner = CliRunner()

INSTANT_FIELDS = {"instant_time", "action", "state", "completion_order"}
# Names that mean the same as an agreed one: never in any output.
RETIRED = {"seq", "first_id", "end_id"}


def _json(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # the whole of stdout is one document


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _events(path: Path) -> Path:
    return write_jsonl(path, fork_flow()[:2])  # RECEIVE and FORK


def test_every_read_command_prints_json_with_the_agreed_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = str(tmp_path / "repo")
    ingested = _json(
        "provenance", "ingest", str(_events(tmp_path / "e.jsonl")), "--repo", repo, "--json"
    )
    assert ingested == {"events": 2, "first_event_id": 0, "last_event_id": 1}
    rolled = _json("provenance", "rollover", "--repo", repo, "--json")
    assert (rolled["first_event_id"], rolled["last_event_id"]) == (0, 1)

    uri = str(tmp_path / "repo" / "tables" / "t1")
    csv = tmp_path / "a.csv"
    csv.write_text("id\n1\n2\n")
    written = _json("table", "write", uri, str(csv), "--json")
    assert set(written) == INSTANT_FIELDS and written["completion_order"] == 1
    claim = runner.invoke(app, ["content", "put", str(csv), "--repo", repo]).stdout

    outputs = {
        "ingest": ingested,
        "rollover": rolled,
        "table write": written,
        "sql": _json(
            "provenance", "sql", "SELECT event_id FROM provenance", "--repo", repo, "--json"
        ),
        "events": _json("provenance", "events", "--repo", repo, "--json"),
        "lineage": _json("provenance", "lineage", "child-1", "--repo", repo, "--json"),
        "timeline show": _json("timeline", "show", "--table", uri, "--json"),
        "timeline show --archived": _json(
            "timeline", "show", "--table", uri, "--archived", "--json"
        ),
        "table read": _json("table", "read", uri, "--json"),
        "table read --count": _json("table", "read", uri, "--count", "--json"),
        "content state": _json("content", "state", claim, "--repo", repo, "--json"),
    }
    for name, out in outputs.items():
        assert not _keys(out) & RETIRED, f"{name}: {sorted(_keys(out) & RETIRED)}"
    for name in ("timeline show", "timeline show --archived"):
        assert outputs[name] and all(set(r) >= INSTANT_FIELDS for r in outputs[name]), name
    assert outputs["timeline show"][0]["completion_order"] == written["completion_order"]
    assert sorted(r["event_id"] for r in outputs["sql"]) == [0, 1]
    assert [e["event_id"] for e in outputs["events"]] == [0, 1]
    assert outputs["table read --count"]["rows"] == 2
    assert outputs["content state"]["accessible"] is True


def test_repo_before_or_after_the_subcommand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo, other = str(tmp_path / "repo"), str(tmp_path / "other")
    _json("--repo", repo, "provenance", "ingest", str(_events(tmp_path / "e.jsonl")), "--json")
    query = ("provenance", "sql", "SELECT count(*) AS n FROM provenance", "--json")
    assert _json("--repo", repo, *query) == [{"n": 2}]
    assert _json(*query, "--repo", repo) == [{"n": 2}]
    # Typed after the subcommand wins over before it; either wins over FLOWLEDGER_REPO.
    assert _json("--repo", other, *query, "--repo", repo) == [{"n": 2}]
    monkeypatch.setenv("FLOWLEDGER_REPO", other)
    assert _json("--repo", repo, *query) == [{"n": 2}]
    assert _json(*query) == [{"n": 0}]  # the environment's (empty) repository
