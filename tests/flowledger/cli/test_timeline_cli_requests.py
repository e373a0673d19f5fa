"""Requests of a CLI commit (`flowledger table write` in a fresh process) against moto's S3
server, counted per S3 API call: 7 when this machine made the newest commit (its
entry is on local disk, timeline/entry_cache.py), 8 after another machine's commit; automatic
archival (on by default) adds none to a commit that archives nothing, also on a table with
archived history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from storage import open_store
from tests.support.paths import REPO_ROOT
from tests.support.servers import S3Endpoint
from timeline import ArchivalSettings, Table, TableSettings
from timeline.archive import read_manifest

pytestmark = pytest.mark.s3

ROOT = REPO_ROOT


def _cli_commit(moto: S3Endpoint, tmp_path: Path, uri: str, *flags: str) -> dict[str, int]:
    csv = tmp_path / "rows.csv"
    csv.write_text("id\n7\n")
    out = tmp_path / "counts.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AWS_ENDPOINT_URL": moto.endpoint,
        "AWS_ACCESS_KEY_ID": moto.access_key,
        "AWS_SECRET_ACCESS_KEY": moto.secret_key,
        "AWS_REGION": moto.region,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # the capability probe's per-endpoint cache
    }
    args = [*flags, "table", "write", uri, str(csv)]
    cmd = [sys.executable, "-m", "tests.support.count_requests", str(out), *args]
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True, timeout=300)
    counts: dict[str, int] = json.loads(out.read_text())
    return counts


def test_a_cli_commit_costs_7_requests_with_automatic_archival(
    moto: S3Endpoint, tmp_path: Path
) -> None:
    bucket = moto.new_bucket()
    uri = f"s3://{bucket}/tables/t1"
    store = open_store(uri, moto.settings())
    archival = ArchivalSettings(keep_min_commits=3, keep_max_commits=4)
    table = Table.open(store, TableSettings(archival=archival))
    for k in range(6):  # archived history: the loader's holes are archived positions
        table.write(pa.table({"id": [k]}))
    assert read_manifest(store).archived_seqs

    first = _cli_commit(moto, tmp_path, uri)  # probes the endpoint once (cached on disk)
    assert "PutObject" in first
    on = _cli_commit(moto, tmp_path, uri)  # default: automatic archival on (20/30)
    off = _cli_commit(moto, tmp_path, uri, "--no-auto-archive")
    assert on == off  # automatic archival costs nothing on a commit that archives nothing
    # LIST instants, PUT requested, LIST <time>. (unique time), PUT inflight, PUT data file,
    # PUT log position, PUT completed; the newest commit's schema comes from the local cache
    assert on == {"ListObjectsV2": 2, "PutObject": 5}
    # after a commit from another machine (no shared cache), its schema costs one GET
    elsewhere = Table.open(open_store(uri, moto.settings()), TableSettings(local_entry_cache=False))
    elsewhere.write(pa.table({"id": [99]}))
    after_other = _cli_commit(moto, tmp_path, uri)
    assert after_other == {"ListObjectsV2": 2, "GetObject": 1, "PutObject": 5}
    reopened = Table.open(open_store(uri, moto.settings()))
    assert reopened.read().num_rows == 11  # all commits landed, archived ones included
