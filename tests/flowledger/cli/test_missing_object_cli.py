"""A data or log file that a completed commit names, gone from the store: every read answers
with the integrity exit (6) and one line naming the object, not "not found" (4), which would
say the table or the instant asked for does not exist."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from flowledger.errors import ANSWERS
from storage import ErrorKind, open_store
from tests.support.cli import Cli
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit

INTEGRITY = ANSWERS[ErrorKind.INTEGRITY].exit_code


def _gone(root: Path, pattern: str) -> str:
    """Deletes the one file under `root/data` matching `pattern`; its file:// URL."""
    (path,) = (root / "data").rglob(pattern)
    path.unlink()
    return path.as_uri()


def _assert_names(code: int, err: str, url: str) -> None:
    assert code == INTEGRITY, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and url in lines[0] and "missing" in lines[0], err


@pytest.mark.parametrize(
    "command", [("table", "read"), ("table", "read", "--json"), ("table", "sql")]
)
def test_a_missing_data_file_is_an_integrity_error(
    tmp_path: Path, cli: Cli, command: tuple[str, ...]
) -> None:
    root = tmp_path / "t"
    Table.open(open_store(str(root))).write(pa.table({"id": [1, 2, 3], "v": [0.5] * 3}))
    url = _gone(root, "*.parquet")
    args = [*command, str(root)]
    if command[1] == "sql":
        args.append("SELECT count(*) FROM t")
    code, _, err = cli(*args)
    _assert_names(code, err, url)


def test_a_missing_log_of_a_merge_on_read_table_is_an_integrity_error(
    tmp_path: Path, cli: Cli
) -> None:
    root = tmp_path / "t"
    props = KeyedProperties.of("k", table_type="merge_on_read")
    t = Table.create(open_store(str(root)), props, TableSettings(compaction_mode="off"))
    t.upsert(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}))
    t.upsert(pa.table({"k": [1], "v": ["new"]}))
    url = _gone(root, ".*.log")
    code, _, err = cli("table", "read", str(root))
    _assert_names(code, err, url)
