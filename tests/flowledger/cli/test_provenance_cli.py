"""`flowledger provenance ...` end to end on a local repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from tests.support.cli import run_cli_process
from tests.support.paths import REPO_ROOT
from tests.support.provenance_events import fork_flow, write_jsonl

pytestmark = pytest.mark.unit
ROOT = REPO_ROOT


def _events_file(path: Path) -> Path:
    return write_jsonl(path, fork_flow())


def test_cli_ingest_sql_events_lineage_rollover_expire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWLEDGER_REPO", str(tmp_path / "repo"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = CliRunner().invoke
    r = run(app, ["provenance", "ingest", str(_events_file(tmp_path / "e.jsonl")), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"events": 3, "first_event_id": 0, "last_event_id": 2}

    r = run(
        app,
        [
            "provenance",
            "sql",
            "SELECT event_type, count(*) AS n FROM provenance GROUP BY 1 ORDER BY 1",
            "--json",
        ],
    )
    assert json.loads(r.output) == [
        {"event_type": "FORK", "n": 1},
        {"event_type": "RECEIVE", "n": 1},
        {"event_type": "SEND", "n": 1},
    ]
    r = run(app, ["provenance", "events", "--first", "1", "--max", "5", "--json"])
    assert [e["event_id"] for e in json.loads(r.output)] == [1, 2]

    r = run(app, ["provenance", "rollover", "--json"])
    assert json.loads(r.output)["events"] == 3

    r = run(app, ["provenance", "lineage", "child-1", "--json"])
    graph = json.loads(r.output)
    assert {n["event_type"] for n in graph["nodes"] if n["type"] == "EVENT"} == {"FORK", "SEND"}
    r = run(app, ["provenance", "lineage", "child-1", "--format", "dot"])
    assert r.output.startswith("digraph lineage")
    r = run(app, ["provenance", "lineage", "child-1", "--format", "svg"])
    assert r.output.startswith("<svg")

    r = run(app, ["provenance", "expire", "--json"])
    assert json.loads(r.output)["files"] == 0  # nothing old or over size


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    env = {
        "FLOWLEDGER_REPO": str(tmp_path / "repo"),
        "XDG_CACHE_HOME": str(tmp_path / "c"),
        "PATH": "/usr/bin:/bin",
    }
    p = run_cli_process("provenance", "sql", "DELETE FROM provenance", env=env, cwd=ROOT)
    assert p.returncode == 8  # forbidden: a write statement through a read-only command
    assert p.stderr.strip().count("\n") == 0
    assert "read-only" in p.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"event_type": "ROUTE", "flowfile_uuid": "u", "component_id": "c", '
        '"component_type": "t", "file_size": 1}\n'
    )
    p = run_cli_process("provenance", "ingest", str(bad), env=env, cwd=ROOT)
    assert p.returncode == 2 and "relationship" in p.stderr  # invalid input


def test_cli_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWLEDGER_REPO", str(tmp_path / "repo"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = CliRunner().invoke
    data = tmp_path / "payload.txt"
    data.write_bytes(b"replay me")
    r = run(app, ["content", "put", str(data)])
    assert r.exit_code == 0, r.output
    claim = json.loads(r.output)
    event = {
        "event_type": "SEND",
        "flowfile_uuid": "ff",
        "component_id": "put",
        "component_type": "PutFile",
        "file_size": claim["length"],
        "transit_uri": "file:/out",
        "content_claim_container": claim["container"],
        "content_claim_section": claim["section"],
        "content_claim_identifier": claim["identifier"],
        "content_claim_offset": claim["offset"],
        "content_claim_checksum": claim["checksum"],
    }
    (tmp_path / "e.jsonl").write_text(json.dumps(event) + "\n")
    assert run(app, ["provenance", "ingest", str(tmp_path / "e.jsonl")]).exit_code == 0
    r = run(app, ["provenance", "replay", "0", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["replay_event_id"] == 1 and out["attributes"]["flowfile.replay"] == "true"
    r = run(app, ["provenance", "events", "--first", "1", "--json"])
    assert json.loads(r.output)[0]["event_type"] == "REPLAY"
