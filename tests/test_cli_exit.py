"""No intermittent abort at exit (issue 12.10): `flowledger table read T --json | cat` used to
die with SIGABRT ("terminate called without an active exception") about once in 20 runs, when
an Arrow thread-pool worker was still alive as the interpreter exited."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from storage import open_store
from timeline import Table

pytestmark = pytest.mark.unit

RUNS = 30


@pytest.mark.timeout(600)
def test_table_read_json_into_a_pipe_exits_cleanly_every_time(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = Table.open(open_store(uri))
    for i in range(3):  # several files: several decodes per read
        table.write(pa.table({"id": list(range(i * 100, i * 100 + 100)), "v": [0.5] * 100}))
    cmd = [sys.executable, "-m", "flowledger", "table", "read", uri, "--json", "--limit", "1000"]
    codes = []
    for _ in range(RUNS):
        # stdout is a pipe, as with `| cat`
        res = subprocess.run(cmd, capture_output=True, timeout=120)
        codes.append(res.returncode)
        assert b"terminate called" not in res.stderr, res.stderr
        assert len(json.loads(res.stdout)) == 300
    assert codes == [0] * RUNS
