"""Running the CLI's real entry point (`flowledger.cli.main`) in process, as a user's shell
would: arguments in `sys.argv`, the exit code from `SystemExit`, stdout and stderr captured."""

from __future__ import annotations

import pytest

from flowledger.cli import main


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `flowledger ARGS...`."""
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
