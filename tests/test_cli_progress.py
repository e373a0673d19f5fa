"""CLI progress: a bar on a terminal, plain lines on stderr for a slow operation elsewhere,
nothing with quiet; and `content put/get` report the bytes they move."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from flowledger import progress as progress_mod
from flowledger.cli import app
from flowledger.progress import CountingReader, progress

pytestmark = pytest.mark.unit


def test_terminal_gets_a_bar_and_pipes_get_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    term = Console(file=out, force_terminal=True, width=100)
    with progress("copy", 1000, console=term) as bar:
        reader = CountingReader(io.BytesIO(b"x" * 1000), bar)
        while reader.read(100):
            pass
    assert bar.done == 1000
    assert "copy" in out.getvalue()  # drawn by rich (escape sequences around it)

    monkeypatch.setattr(progress_mod, "PLAIN_EVERY_S", 0.0)  # every advance is "slow"
    plain = io.StringIO()
    with progress("copy", 300, stream=plain) as bar:
        for _ in range(3):
            bar.advance(100)
    lines = plain.getvalue().splitlines()
    assert lines[-1] == "copy: 100% (300 of 300 bytes)" and "\x1b" not in plain.getvalue()

    quiet = io.StringIO()
    with progress("copy", 300, stream=quiet, quiet=True) as bar:
        bar.advance(300)
    assert quiet.getvalue() == ""


def test_a_quick_operation_prints_nothing_when_not_a_terminal() -> None:
    plain = io.StringIO()
    with progress("copy", 10, stream=plain) as bar:
        bar.advance(10)
    assert plain.getvalue() == ""


def test_content_put_and_get_round_trip_with_progress(tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(3 * 2**20))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    repo = str(tmp_path / "repo")
    put = subprocess.run(
        [sys.executable, "-m", "flowledger", "content", "put", str(src), "--repo", repo],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    claim = put.stdout.strip()
    out = tmp_path / "out.bin"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "flowledger",
            "content",
            "get",
            claim,
            "-o",
            str(out),
            "--repo",
            repo,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert out.read_bytes() == src.read_bytes()
    assert "\x1b" not in put.stderr  # not a terminal: no bar drawn


def test_read_position_follows_a_reader_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"x" * 5000)
    assert progress_mod.read_position(path) is None  # nobody has it open
    with open(path, "rb", buffering=0) as fh:
        fh.read(1234)
        assert progress_mod.read_position(path) == 1234


def test_a_slow_activity_prints_plain_lines_when_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_mod, "PLAIN_EVERY_S", 0.0)
    plain = io.StringIO()
    with progress_mod.activity("rollover", stream=plain):
        for _ in range(600):  # wait (bounded) for the ticker's first line
            if plain.getvalue():
                break
            threading.Event().wait(0.05)
    lines = plain.getvalue().splitlines()
    assert lines[0].startswith("rollover: running for ") and lines[-1].startswith("rollover: done")
    assert "\x1b" not in plain.getvalue()

    quiet = io.StringIO()
    with progress_mod.activity("rollover", stream=quiet, quiet=True):
        threading.Event().wait(0.3)
    assert quiet.getvalue() == ""


def _events_file(path: Path, n: int) -> Path:
    line = (
        '{"event_type": "RECEIVE", "flowfile_uuid": "ff-%d", "component_id": "get", '
        '"component_type": "GetFile", "file_size": 1, "transit_uri": "file:/in", '
        '"event_time": %d}\n'
    )
    path.write_text("".join(line % (i, 1000 + i) for i in range(n)))
    return path


def test_long_commands_stay_plain_off_a_terminal_and_pure_json_with_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_mod, "PLAIN_EVERY_S", 0.0)  # every tick prints a plain line
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = str(tmp_path / "repo")
    events = _events_file(tmp_path / "e.jsonl", 2000)
    runner = CliRunner()

    plain = runner.invoke(app, ["provenance", "ingest", str(events), "--repo", repo])
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.startswith("registered 2000 events")
    assert "\x1b" not in plain.stdout + plain.stderr  # no bar control codes
    assert all(line.startswith("ingest e.jsonl: ") for line in plain.stderr.splitlines())

    table = str(tmp_path / "repo" / "tables" / "t1")
    csv = tmp_path / "a.csv"
    csv.write_text("id\n1\n")
    for _ in range(3):
        assert runner.invoke(app, ["table", "write", table, str(csv)]).exit_code == 0
    again = _events_file(tmp_path / "f.jsonl", 10)
    for args in (
        ["provenance", "ingest", str(again), "--repo", repo],
        ["provenance", "rollover", "--repo", repo],
        ["provenance", "expire", "--repo", repo],
        [
            "timeline",
            "archive",
            "--table",
            table,
            "--keep-min-commits",
            "1",
            "--keep-max-commits",
            "2",
        ],
    ):
        r = runner.invoke(app, [*args, "--json"])
        assert r.exit_code == 0, r.output
        assert isinstance(json.loads(r.stdout), dict), args  # stdout: exactly one document
        assert r.stderr == "", args  # --json: no progress at all
