"""CLI progress: a bar on a terminal, plain lines on stderr for a slow operation elsewhere,
nothing with quiet; and `content put/get` report the bytes they move."""

from __future__ import annotations

import io
import json
import os
import re
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
from tests.support.paths import REPO_ROOT

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
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
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


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run `flowledger ARGS` with stdout and stderr on a pseudo-terminal (120 columns); what
    it drew, escape sequences removed."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowledger", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env={**env, "TERM": "xterm-256color", "COLUMNS": "120"},
    )
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break  # bounded: a hung command fails the assertions below
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    raw = b"".join(chunks).decode(errors="replace")
    assert "\x1b[" in raw  # drawn for a terminal
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).replace("\r", "\n")


def _frames(text: str, unit: str) -> list[tuple[int, str]]:
    """Every `done/total unit` the bar showed, in order ('?': total not known yet)."""
    return [(int(d), t) for d, t in re.findall(rf"(\d+)/(\d+|\?) {unit}", text)]


def test_rollover_expire_and_archive_draw_bars_that_reach_their_total_on_a_terminal(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    repo = str(tmp_path / "repo")
    runner = CliRunner()
    for n in range(3):  # three ingests: three journals to merge
        events = _events_file(tmp_path / f"e{n}.jsonl", 50)
        assert (
            runner.invoke(app, ["provenance", "ingest", str(events), "--repo", repo]).exit_code == 0
        )

    text = _on_a_terminal(["provenance", "rollover", "--repo", repo], env)
    frames = _frames(text, "journals")
    merged = int(re.findall(r"rolled over \d+ events from (\d+) journals", text)[0])
    assert merged >= 1 and frames[-1] == (merged, str(merged)), frames
    assert frames[0][0] == 0, frames  # from nothing to all

    text = _on_a_terminal(["provenance", "expire", "--repo", repo, "--max-storage-size", "0"], env)
    frames = _frames(text, "files")
    expired = int(re.findall(r"expired (\d+) files", text)[0])
    assert expired >= 1 and frames[-1] == (expired, str(expired)), frames
    assert frames[0][0] == 0, frames
    assert "━" in text  # a bar, not a spinner

    table = str(tmp_path / "repo" / "tables" / "t1")
    csv = tmp_path / "a.csv"
    csv.write_text("id\n1\n")
    for _ in range(4):
        assert runner.invoke(app, ["table", "write", table, str(csv)]).exit_code == 0
    limits = ["--keep-min-commits", "1", "--keep-max-commits", "2"]
    text = _on_a_terminal(["timeline", "archive", "--table", table, *limits], env)
    frames = _frames(text, "steps")
    assert "archived 3 instants" in text
    assert frames[-1] == (6, "6") and frames[0][0] == 0, frames  # read, then removed: 2 each


def test_steps_report_units_as_plain_lines_when_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_mod, "PLAIN_EVERY_S", 0.0)  # every advance prints a line
    plain = io.StringIO()
    with progress_mod.steps("rollover", "journals", stream=plain) as bar:
        bar.callback(0, 3)  # what ProvenanceRepository.rollover(progress=...) is told
        for _ in range(3):
            bar.callback(1, None)
    lines = plain.getvalue().splitlines()
    assert lines[0].startswith("rollover: 1 of 3 journals in ")
    assert lines[-1].startswith("rollover: 3 of 3 journals in ") and bar.done == 3
    assert "\x1b" not in plain.getvalue()
