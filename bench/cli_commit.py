"""Requests per CLI commit (`flowledger table write` in a fresh process each), on MinIO, per
S3 API call, against a baseline in the same run.

Each commit is a new `python -m flowledger table write` process with botocore's API calls
counted (the capability probe is cached on disk per endpoint, so only the first commit of a
run probes; it is left out). Automatic archival on (the default, 20/30) and off. `--before DIR`
runs the same commits with PYTHONPATH=DIR (e.g. `git archive main | tar -x -C DIR`).

`python -m bench cli_commit [--quick] [--before DIR]`
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench.common import BenchBackend, before_tree, code_trees, console, minio_backend, table

_WORKER = r"""
import atexit, collections, json, sys, botocore.client
counts = collections.Counter()
call = botocore.client.BaseClient._make_api_call
def counted(self, op, params):
    counts[op] += 1
    return call(self, op, params)
botocore.client.BaseClient._make_api_call = counted
try:  # reads past botocore (obstore, or the older hand-signed path), where the tree has them
    try:
        from storage.s3_reads import ObjectReads as FastReads
    except ImportError:
        from storage.s3_fast import FastReads
    for name, op in (("get", "GetObject"), ("head", "HeadObject")):
        def wrap(f, op=op):
            def w(self, *a):
                counts[op] += 1
                return f(self, *a)
            return w
        setattr(FastReads, name, wrap(getattr(FastReads, name)))
except ImportError:
    pass
atexit.register(lambda: open(sys.argv[1], "w").write(json.dumps(counts)))
from flowledger.cli import app
app(sys.argv[2:], prog_name="flowledger")
"""

_SHORT = {"ListObjectsV2": "LIST", "GetObject": "GET", "PutObject": "PUT", "HeadObject": "HEAD"}


def _commits(backend: BenchBackend, root: Path, uri: str, n: int, on: bool) -> list[Counter[str]]:
    s = backend.settings
    env = dict(
        os.environ,
        PYTHONPATH=str(root),
        AWS_ENDPOINT_URL=s.endpoint_url or "",
        AWS_ACCESS_KEY_ID=s.access_key_id or "",
        AWS_SECRET_ACCESS_KEY=s.secret_access_key or "",
        AWS_REGION=s.region,
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-cli-") as tmp:
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        csv, out = Path(tmp) / "rows.csv", Path(tmp) / "counts.json"
        csv.write_text("id\n1\n")
        flags = [] if on else ["--no-auto-archive"]
        for _ in range(n):
            cmd = [sys.executable, "-c", _WORKER, str(out), *flags, "table", "write", uri, str(csv)]
            subprocess.run(cmd, env=env, cwd=root, check=True, capture_output=True, timeout=600)
            counts = json.loads(out.read_text())
            rows.append(Counter({_SHORT.get(k, k): v for k, v in counts.items()}))
    return rows[1:]  # the first process probes the endpoint (then cached per endpoint)


def _mix(c: Counter[str]) -> str:
    return f"{sum(c.values())}: " + " ".join(f"{k}={v}" for k, v in sorted(c.items()))


def _archived(c: Counter[str]) -> bool:
    return c.get("DeleteObjects", 0) > 0  # an archival run deletes the archived states


def run(backend: BenchBackend, n: int, before: Path | None) -> None:
    t = table(
        f"MinIO: requests per CLI commit (fresh process each), {n} commits",
        "code / automatic archival",
        "requests, nothing archived (median)",
        "archiving commits",
        "mix before any archival",
        "mix with archived history",
    )
    for label, root in code_trees(before):
        for on in (True, False):
            uri = f"{backend.uri}/{label}-{'on' if on else 'off'}"
            rows = _commits(backend, root, uri, n, on)
            plain = [r for r in rows if not _archived(r)]
            arch = [sum(r.values()) for r in rows if _archived(r)]
            med = statistics.median(sum(r.values()) for r in plain)
            first = next((k for k, r in enumerate(rows) if _archived(r)), len(rows))
            after = rows[first + 1 :]  # commits on a table with archived history
            archiving = f"{statistics.median(arch):.0f} ({len(arch)}x)" if arch else "-"
            t.add_row(
                f"{label} / {'on (20/30)' if on else 'off'}",
                f"{med:.0f}",
                archiving,
                _mix(rows[0]),
                _mix(after[-1]) if after else "-",
            )
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    before = before_tree(args)
    n = 12 if "--quick" in args else 36
    with minio_backend() as backend:
        run(backend, n, before)


if __name__ == "__main__":
    main()
