"""`flowledger table write --operation delete --where`: the predicate is one boolean
expression over the table's columns; a program (statements, subqueries, table functions) or a
predicate that does not bind is a usage error (exit 2, one line) and nothing is written. The
CLI's real entry point (`flowledger.cli.main`) runs in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli

pytestmark = pytest.mark.unit


_cli = run_cli


@pytest.fixture
def table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    uri = str(tmp_path / "t")
    rows = tmp_path / "a.csv"
    rows.write_text("id,v\n1,1\n2,2\n3,1\n")
    assert _cli(monkeypatch, capsys, "table", "create", uri, "--record-key", "id")[0] == 0
    assert (
        _cli(monkeypatch, capsys, "table", "write", uri, str(rows), "--operation", "upsert")[0] == 0
    )
    return uri


def _ids(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], uri: str
) -> list[int]:
    rc, out, err = _cli(monkeypatch, capsys, "table", "read", uri, "--json")
    assert rc == 0, err
    return sorted(r["id"] for r in json.loads(out)["data"])


def test_a_where_that_runs_sql_is_refused_with_exit_2(
    tmp_path: Path,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root\n")
    hostile = [
        f"length((SELECT content FROM read_text('{secret}'))) > 0",
        f"v = 1; COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'",
        f"v = 1; ATTACH '{tmp_path / 'x.db'}'",
        f"len(glob('{tmp_path}/*')) > 0",
        f"EXISTS (SELECT 1 FROM read_csv('{secret}'))",
    ]
    for where in hostile:
        rc, _, err = _cli(
            monkeypatch, capsys, "table", "write", table, "--operation", "delete", "--where", where
        )
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, err
        assert lines[0].startswith("flowledger: error: the predicate (where)"), err
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.db").exists()
    assert _ids(monkeypatch, capsys, table) == [1, 2, 3]


def test_a_bad_where_is_a_usage_error_naming_the_problem(
    table: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(where: str) -> str:
        rc, _, err = _cli(
            monkeypatch, capsys, "table", "write", table, "--operation", "delete", "--where", where
        )
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, err  # not 70, the exit code of a bug
        assert "internal error" not in err and "Traceback" not in err
        return lines[0]

    unknown = refused("nope = 1")
    assert "unknown column(s) nope" in unknown and "id, v" in unknown
    assert "not one SQL expression" in refused("v = = 1")
    assert "not a boolean" in refused("v")
    assert _ids(monkeypatch, capsys, table) == [1, 2, 3]
    rc, _, err = _cli(
        monkeypatch, capsys, "table", "write", table, "--operation", "delete", "--where", "v = 1"
    )
    assert rc == 0, err
    assert _ids(monkeypatch, capsys, table) == [2]
