"""Running the CLI's real entry point (`flowledger.cli.main`) as a user's shell would: in
process (arguments in `sys.argv`, the exit code from `SystemExit`, stdout and stderr
captured), or in a fresh process of this checkout's code."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `flowledger ARGS...`."""
    from flowledger.cli import main  # only where the CLI runs: conftest imports this module

    monkeypatch.setattr("sys.argv", ["flowledger", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


class Cli:
    """`run_cli` bound to one test's monkeypatch and capsys: `cli("table", "read", uri)`
    (the `cli` fixture of tests/conftest.py)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.monkeypatch, self.capsys = monkeypatch, capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        return run_cli(self.monkeypatch, self.capsys, *args)


def run_cli_process(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`flowledger ARGS...` in a fresh process running this checkout's code: the environment
    is this process's, or `env` alone, with PYTHONPATH naming the checkout."""
    full = {**(os.environ if env is None else env), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "flowledger", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full,
        timeout=timeout,
    )
