"""CLI progress: a bar on a terminal, plain lines on stderr for a slow operation elsewhere,
nothing with quiet; and `content put/get` report the bytes they move."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from flowledger import progress as progress_mod
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
