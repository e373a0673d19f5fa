"""`flowledger table files`: exactly the files a snapshot reads, so that an outside engine
(DuckDB here) over the listed files counts the table's rows, where DuckDB over the table's
folder also counts replaced slices; a merge-on-read snapshot with logs is refused (one line,
the refusal exit code) unless --read-optimized."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from storage import open_store
from tests.support.cli import run_cli_process
from timeline import Table
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli_process("table", "files", *args)


def _listed(*args: str) -> list[str]:
    res = _cli(*args)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def _duckdb_count(files: list[str]) -> int:
    paths = ", ".join("'" + f.removeprefix("file://") + "'" for f in files)
    sql = f"SELECT count(*) FROM read_parquet([{paths}], union_by_name=true)"
    row = duckdb.connect().execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def _folder_count(uri: str) -> int:
    sql = f"SELECT count(*) FROM read_parquet('{uri}/**/*.parquet')"
    row = duckdb.connect().execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_duckdb_over_the_listed_files_counts_exactly_the_tables_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "cow")
    table = Table.create(open_store(uri), KeyedProperties.of("id", partition_by=("p",)))
    first = table.upsert(pa.table({"id": list(range(100)), "p": [i % 2 for i in range(100)]}))
    table.upsert(pa.table({"id": list(range(0, 100, 3)), "p": [i % 2 for i in range(0, 100, 3)]}))
    table.delete(list(range(90, 100)))
    rows = table.read().num_rows
    assert rows == 90

    files = _listed(uri)
    assert files and all(f.startswith("file://") and f.endswith(".parquet") for f in files)
    assert sorted(files) == sorted(table.store.url(f.path) for f in table.snapshot().files)
    assert _duckdb_count(files) == rows
    assert _folder_count(uri) > rows  # the folder also holds every replaced slice

    doc: dict[str, Any] = json.loads(_cli(uri, "--json").stdout)
    assert doc["rows"] == rows and [f["uri"] for f in doc["files"]] == files
    assert sum(f["rows"] for f in doc["files"]) == rows and doc["read_optimized"] is False

    then = _listed(uri, "--as-of", first.time)
    assert _duckdb_count(then) == table.read(first.time).num_rows == 100


def test_merge_on_read_logs_are_refused_until_compacted(tmp_path: Path) -> None:
    uri = str(tmp_path / "mor")
    props = KeyedProperties.of("id", table_type="merge_on_read")
    table = Table.create(open_store(uri), props)
    table.upsert(pa.table({"id": list(range(50)), "v": ["a"] * 50}))
    table.upsert(pa.table({"id": list(range(60, 70)), "v": ["b"] * 10}))
    table.delete(list(range(10)))
    assert table.read().num_rows == 50

    refused = _cli(uri)
    assert refused.returncode == 1 and refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "log file" in lines[0] and "--read-optimized" in lines[0]

    base = _listed(uri, "--read-optimized")
    ro = table.read(read_optimized=True).num_rows
    assert _duckdb_count(base) == ro
    assert json.loads(_cli(uri, "--read-optimized", "--json").stdout)["read_optimized"] is True

    assert table.maintenance.compact() is not None
    files = _listed(uri)
    assert _duckdb_count(files) == table.read().num_rows == 50
