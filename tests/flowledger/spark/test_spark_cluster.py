"""Keyed writes on a real Spark standalone cluster (a master and two workers on loopback,
executors in their own JVMs and Python workers): upsert, insert and delete through both
Spark writers leave the same table as the Python path. S3 and the s3a jars reach the
executors only through the application's conf; the table lives on MinIO."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storage import ObjectStore
from storage.s3a import s3a_conf
from tests.support.keyed_spark import apply_python, comparable
from tests.support.paths import REPO_ROOT
from tests.support.servers import S3Endpoint
from tests.support.spark_cluster import Cluster, standalone_cluster
from timeline import Table

pytestmark = pytest.mark.spark

ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    try:
        from infra import spark as infra_spark

        infra_spark.jar_paths()
    except Exception as exc:
        pytest.skip(f"s3a jars missing: {exc}; run `make spark-jars`")
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), str(ROOT)) as c:
        yield c


def test_keyed_writes_on_a_standalone_cluster_equal_the_python_path(
    cluster: Cluster, minio: S3Endpoint, tmp_path: Path, opened: Callable[..., ObjectStore]
) -> None:
    from infra import spark as infra_spark

    bucket = minio.new_bucket()
    tables = {w: f"s3a://{bucket}/tables/{w}" for w in ("native", "datasource")}
    args = {
        "master": cluster.master_url,
        "repo": str(tmp_path / "repo"),
        "jars": [str(j) for j in infra_spark.jar_paths()],
        "s3a": s3a_conf(minio.settings()),
        "tables": tables,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYSPARK_PYTHON"] = sys.executable
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.keyed_cluster_driver", json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr[-5000:] + cluster.log_tail()
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["master"] == cluster.master_url and got["executors"] == 2
    # Tasks ran in Python workers of the executors, not in the driver's process.
    assert got["driver_pid"] not in got["python_workers"]
    reference, ref_instants = apply_python(tmp_path / "python")
    want = comparable(reference, ref_instants)
    for writer, uri in tables.items():
        instants = got["instants"][writer]
        table = Table.open(opened(uri, minio.settings()))
        assert comparable(table, instants) == want, writer


def test_a_compaction_on_a_standalone_cluster(
    cluster: Cluster, minio: S3Endpoint, tmp_path: Path, opened: Callable[..., ObjectStore]
) -> None:
    """`flowledger.spark.compact` end to end: the plan scheduled by the driver, the file
    groups compacted by the executors, the compaction completed as a commit."""
    import pyarrow as pa

    from infra import spark as infra_spark
    from timeline import COMMIT, TableSettings
    from timeline.keyed import KeyedProperties

    bucket = minio.new_bucket()
    props = KeyedProperties.of(
        "id", ordering_field="ts", partition_by="p", table_type="merge_on_read"
    )
    store = opened(f"s3://{bucket}/tables/mor", minio.settings())
    table = Table.create(store, props, TableSettings(compaction_mode="off"))

    def rows(ids: list[int], v: str, ts: int) -> pa.Table:
        p = [str(i % 3) for i in ids]
        return pa.table({"id": ids, "ts": [ts] * len(ids), "p": p, "v": [v] * len(ids)})

    table.upsert(rows(list(range(60)), "base", 1))
    table.upsert(rows(list(range(0, 60, 2)), "u1", 2))
    table.delete(pa.table({"id": [3, 9], "ts": [5, 5]}))
    want = sorted(table.read().to_pylist(), key=lambda r: r["id"])
    args = {
        "master": cluster.master_url,
        "repo": str(tmp_path / "repo"),
        "jars": [str(j) for j in infra_spark.jar_paths()],
        "s3a": s3a_conf(minio.settings()),
        "table": f"s3a://{bucket}/tables/mor",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYSPARK_PYTHON"] = sys.executable
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.compaction_cluster_driver", json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr[-5000:] + cluster.log_tail()
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["executors"] == 2 and got["driver_pid"] not in got["python_workers"]
    assert len(got["compacted"]) == 1
    after = Table.open(store)
    e = after.entry(got["compacted"][0])
    assert e.action == COMMIT and e.metadata["operation"] == "compact"
    assert sorted(after.read().to_pylist(), key=lambda r: r["id"]) == want
    read_optimized = after.read(read_optimized=True).to_pylist()
    assert sorted(read_optimized, key=lambda r: r["id"]) == want
