"""No intermittent abort at exit: `flowledger table read T --json | cat` used to
die with SIGABRT ("terminate called without an active exception") about once in 20 runs, when
an Arrow thread-pool worker was still alive as the interpreter exited."""

from __future__ import annotations

import json
import os
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
        assert res.stdout, (res.returncode, res.stderr[-4000:])
        assert len(json.loads(res.stdout)["data"]) == 300
    assert codes == [0] * RUNS


_PROBE = """
import atexit, os, sys
from flowledger.cli import main

def threads():
    tasks = os.listdir("/proc/self/task")
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in tasks]
    sys.stderr.write("THREADS " + ",".join(n for n in names if n != "jemalloc_bg_thd") + "\\n")

atexit.register(threads)
sys.argv = ["flowledger", *sys.argv[1:]]
main()
"""


@pytest.mark.timeout(120)
def test_no_native_worker_thread_is_alive_when_table_read_exits(tmp_path: Path) -> None:
    """The cause, checked directly: only the main thread is left when the interpreter exits
    (Arrow's pool workers, which the abort needs, are never started by a read)."""
    uri = str(tmp_path / "t")
    Table.open(open_store(uri)).write(pa.table({"id": [1, 2, 3]}))
    cmd = [sys.executable, "-c", _PROBE, "table", "read", uri, "--json"]
    # numpy (pulled in by pyarrow when installed) starts OpenBLAS's idle worker pool, named
    # like the main thread; those pthreads are harmless at exit, Arrow's C++ workers are not.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stderr.splitlines() if x.startswith("THREADS "))
    assert line.split(" ", 1)[1].split(",") == ["python"]  # the main thread only
