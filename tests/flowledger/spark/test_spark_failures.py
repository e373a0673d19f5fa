"""Spark drivers that die mid-write and Spark applications that race, as separate processes
(each runs tests/support/spark_driver.py with its own JVM) against MinIO over s3a."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import flowledger.spark as fs
from flowledger.spark.commit_info import REPO_CONF_KEY
from storage import ObjectStore
from tests.support.paths import REPO_ROOT
from tests.support.servers import S3Endpoint
from timeline import Table
from timeline.layout import data_prefix

pytestmark = pytest.mark.spark
ROOT = REPO_ROOT


def _env(minio: S3Endpoint, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AWS_ENDPOINT_URL=minio.endpoint,
        AWS_ACCESS_KEY_ID=minio.access_key,
        AWS_SECRET_ACCESS_KEY=minio.secret_key,
        AWS_REGION=minio.region,
        PYTHONPATH=str(ROOT),
        **extra,
    )
    return env


def _start(args: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.spark_driver", json.dumps(args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its JVM is in its process group: reaped with it below
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # only the group this test started
    return proc.returncode, out, err


@pytest.fixture(autouse=True, scope="module")
def _provenance_repo(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """This module's writes report provenance to a repo of its own, not ./flowledger-data."""
    spark.conf.set(REPO_CONF_KEY, str(tmp_path_factory.mktemp("repo")))
    yield
    spark.conf.unset(REPO_CONF_KEY)


def _frame(spark: Any, start: int, end: int) -> Any:
    return spark.range(start, end).selectExpr("id", "id % 3 as p")


def test_killed_driver_leaves_snapshot_and_next_write_rolls_it_back(
    spark: Any, minio: S3Endpoint, opened: Callable[..., ObjectStore]
) -> None:
    uri = f"s3a://{minio.new_bucket()}/tables/t"
    fs.write(_frame(spark, 0, 10), uri)
    before = Table.open(opened(uri, minio.settings())).snapshot()

    # The driver is SIGKILLed after Spark wrote its files, before the instant completed.
    step = {"uri": uri, "mode": "append", "start": 100, "end": 200}
    proc = _start(
        {"name": "killed", "repo": uri + "-repo", "steps": [step]},
        _env(minio, FLOWLEDGER_CRASH_AT="spark.written"),
    )
    code, _, err = _finish(proc)
    assert code == -signal.SIGKILL, err[-3000:]

    table = Table.open(opened(uri, minio.settings()))
    assert table.snapshot() == before
    pending = {i.time for i in table.timeline().pending()}
    assert len(pending) == 1
    killed = pending.pop()
    assert list(table.store.list(data_prefix(killed)))  # its files exist, invisible

    # Several writers (LAZY, the default): a write whose heartbeat has not expired may still be
    # running somewhere, so the next write leaves it alone...
    fs.write(_frame(spark, 200, 205), uri)
    table = Table.open(opened(uri, minio.settings()))
    assert killed in {i.time for i in table.timeline().pending()}
    # ...and rolls it back once its heartbeat expired (interval x (misses + 1) + 1 s mtime slack).
    keys = {
        "spark.flowledger.hoodie.client.heartbeat.interval_in_ms": "500",
        "spark.flowledger.hoodie.client.heartbeat.tolerable.misses": "0",
    }
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        time.sleep(2.0)
        fs.write(_frame(spark, 300, 305), uri)
    finally:
        for k in keys:
            spark.conf.unset(k)
    table = Table.open(opened(uri, minio.settings()))
    assert table.snapshot().rows == before.rows + 10
    assert not table.timeline().pending()
    assert not list(table.store.list(data_prefix(killed)))  # no orphan data files
    assert fs.read(spark, uri).count() == before.rows + 10


def test_killed_driver_is_rolled_back_at_once_by_the_next_eager_write(
    spark: Any, minio: S3Endpoint, opened: Callable[..., ObjectStore]
) -> None:
    uri = f"s3a://{minio.new_bucket()}/tables/t"
    fs.write(_frame(spark, 0, 10), uri)
    before = Table.open(opened(uri, minio.settings())).snapshot()

    step = {"uri": uri, "mode": "append", "start": 100, "end": 200}
    proc = _start(
        {"name": "killed", "repo": uri + "-repo", "steps": [step]},
        _env(minio, FLOWLEDGER_CRASH_AT="spark.written"),
    )
    code, _, err = _finish(proc)
    assert code == -signal.SIGKILL, err[-3000:]
    table = Table.open(opened(uri, minio.settings()))
    assert table.snapshot() == before
    (killed,) = {i.time for i in table.timeline().pending()}
    assert list(table.store.list(data_prefix(killed)))

    # One writer (EAGER): the next write rolls back every pending write when it starts, with
    # no wait for a heartbeat to expire.
    key = "spark.flowledger.hoodie.cleaner.policy.failed.writes"
    spark.conf.set(key, "EAGER")
    try:
        fs.write(_frame(spark, 300, 305), uri)
    finally:
        spark.conf.unset(key)
    table = Table.open(opened(uri, minio.settings()))
    assert not table.timeline().pending()
    assert killed not in {i.time for i in table.timeline().completed()}
    assert table.snapshot().rows == before.rows + 5
    assert {f.path for f in before.files} <= {f.path for f in table.snapshot().files}
    assert not list(table.store.list(data_prefix(killed)))  # no orphan data files
    assert fs.read(spark, uri).count() == before.rows + 5


def test_two_applications_append_both_and_overwrite_one_winner(
    spark: Any, minio: S3Endpoint, tmp_path: Path, opened: Callable[..., ObjectStore]
) -> None:
    bucket = minio.new_bucket()
    appends, overwrites = f"s3a://{bucket}/tables/appends", f"s3a://{bucket}/tables/over"
    fs.write(_frame(spark, 0, 10), overwrites)
    uri_repo = f"s3://{bucket}/repo"

    def steps(offset: int) -> list[dict[str, Any]]:
        return [
            {"uri": appends, "mode": "append", "start": offset, "end": offset + 20,
             "barrier": str(tmp_path / "appends"), "parties": 2},
            {"uri": overwrites, "mode": "overwrite", "start": offset,
             "end": offset + 7 + offset // 1000,
             "barrier": str(tmp_path / "overwrites"), "parties": 2},
        ]  # fmt: skip

    procs = {
        name: _start({"name": name, "repo": uri_repo, "steps": steps(offset)}, _env(minio))
        for name, offset in (("app-a", 1000), ("app-b", 2000))
    }
    results = {}
    for name, proc in procs.items():
        code, out, err = _finish(proc)
        assert code == 0, err[-3000:]
        results[name] = json.loads(out.strip().splitlines()[-1])

    # Appends never conflict: both land.
    assert all("instant" in r[0] for r in results.values())
    assert fs.read(spark, appends).count() == 40

    # Overlapping overwrites: exactly one wins; the other names the winner.
    wins = [r[1] for r in results.values() if "instant" in r[1]]
    losses = [r[1] for r in results.values() if "conflict" in r[1]]
    assert len(wins) == 1 and len(losses) == 1
    assert losses[0]["winner"] == wins[0]["instant"]
    assert f"replacecommit {wins[0]['instant']}" in losses[0]["conflict"]
    assert fs.read(spark, overwrites).count() == wins[0]["rows"]
    table = Table.open(opened(overwrites, minio.settings()))
    assert not table.timeline().pending()  # the loser rolled its own write back
