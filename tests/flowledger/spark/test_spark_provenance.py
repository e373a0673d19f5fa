"""Provenance of a real Spark job on MinIO over s3a, and the provenance as a Spark DataFrame."""

from __future__ import annotations

from typing import Any

import pytest

from flowledger.spark import (
    CommitInfo,
    OutputFile,
    SparkJobInfo,
    input_files,
    provenance,
    record_commit,
)
from flowledger.spark.commit_info import JOB_METADATA_KEY
from provenance import ProvenanceEvent, ProvenanceRepository
from provenance.schema import VIEW_COLUMNS
from storage import open_store
from tests.support.servers import S3Endpoint
from timeline.layout import data_prefix
from timeline.metadata import DataFile
from timeline.table import Table

pytestmark = pytest.mark.spark


def _spark_commit(spark: Any, minio: S3Endpoint, bucket: str, repo: str) -> CommitInfo:
    """A Spark job reads CSV files from MinIO and writes Parquet into a timeline instant,
    the way the native writer does: Spark's writer, then the timeline commit."""
    raw = open_store(f"s3://{bucket}/raw", minio.settings())
    for i in range(3):
        raw.put(f"orders/{i}.csv", ("id,qty\n" + f"{i},{i + 1}\n{i + 10},{i + 2}\n").encode())
    df = spark.read.option("header", True).csv(f"s3a://{bucket}/raw/orders/")
    table_uri = f"s3a://{bucket}/tables/orders"
    table = Table.open(open_store(table_uri, minio.settings()))
    txn = table.begin(action="commit")
    df.coalesce(2).write.parquet(f"{table_uri}/{data_prefix(txn.instant_time)}")
    sc = spark.sparkContext
    job = SparkJobInfo(sc.applicationId, sc.appName, "flowledger.write", sc.sparkUser(),
                       tuple(df.inputFiles()))  # fmt: skip
    files = []
    for info in table.store.list(data_prefix(txn.instant_time)):
        if info.key.endswith(".parquet"):
            rows = spark.read.parquet(f"{table_uri}/{info.key}").count()
            txn.add(DataFile(info.key, info.size, rows))
            files.append(OutputFile(f"{table_uri}/{info.key}", rows, info.size))
    instant = txn.commit(extra_metadata={JOB_METADATA_KEY: job.to_json()})
    return CommitInfo(table_uri, instant.time, "commit", "insert", tuple(files), job, repo)


def test_lineage_of_each_output_file_of_a_spark_job_names_its_input_files(
    spark: Any, minio: S3Endpoint
) -> None:
    bucket = minio.new_bucket()
    repo_uri = f"s3://{bucket}/repo"
    info = _spark_commit(spark, minio, bucket, repo_uri)
    inputs = sorted(info.job.input_files)
    assert len(inputs) == 3 and all(p.startswith("s3a://") for p in inputs)
    assert record_commit(info, minio.settings()) == 3 + 1 + 1 + len(info.files)
    assert record_commit(info, minio.settings()) == 0
    with ProvenanceRepository.open(open_store(repo_uri, minio.settings())) as repo:
        sends = [e for e in repo.get_events(0, 100) if e.event_type == "SEND"]
        assert sorted(e.transit_uri or "" for e in sends) == sorted(f.uri for f in info.files)
        for send in sends:
            assert input_files(repo, send.flowfile_uuid) == inputs


def test_provenance_dataframe_shows_committed_files_and_journals_as_sql_does(
    spark: Any, minio: S3Endpoint
) -> None:
    bucket = minio.new_bucket()
    repo_uri = f"s3://{bucket}/repo"
    with ProvenanceRepository.open(open_store(repo_uri, minio.settings())) as repo:
        assert provenance(spark, repo).count() == 0  # empty repository: the view's columns
        for batch in range(3):
            repo.register_events(
                [
                    ProvenanceEvent(
                        "RECEIVE",
                        f"ff-{batch}-{i}",
                        "get",
                        "GetFile",
                        10 + i,
                        transit_uri=f"file:///in/{batch}/{i}",
                    )
                    for i in range(40)
                ],
                sync=True,
            )
            repo.rollover()  # one committed file per batch
        # Right after a write, its events are in a journal: the DataFrame shows them, as the
        # CLI's `provenance sql` does.
        late = [
            ProvenanceEvent("DROP", "ff-late", "x", "Y", 1, updated_attributes={"why": "late"}),
            ProvenanceEvent(
                "JOIN", "ff-join", "m", "Merge", 2, parent_uuids=("ff-0-0", "ff-1-0"),
                child_uuids=("ff-join",), lineage_start_date=1_790_000_000_123,
            ),
        ]  # fmt: skip
        repo.register_events(late, sync=True)
        assert repo.snapshot(0).journals  # not rolled over
        frame = provenance(spark, repo_uri, minio.settings())
        assert tuple(frame.columns) == VIEW_COLUMNS
        whole = "count(*), sum(file_size), count(DISTINCT flowfile_uuid), max(event_id)"
        _, rows = repo.sql(f"SELECT {whole} FROM provenance")
        assert tuple(frame.selectExpr(*whole.split(", ")).first()) == rows[0]
        assert rows[0][0] == 3 * 40 + 2
        # The journal's rows have the view's values and types.
        recent = "event_type, flowfile_uuid, lineage_start_date, parent_uuids, updated_attributes"
        got = frame.where("flowfile_uuid IN ('ff-late', 'ff-join')").selectExpr(
            *recent.split(", ")).orderBy("flowfile_uuid").collect()  # fmt: skip
        _, expected = repo.sql(
            f"SELECT {recent} FROM provenance WHERE flowfile_uuid IN ('ff-late', 'ff-join') "
            "ORDER BY flowfile_uuid"
        )
        assert [tuple(r) for r in got] == expected
        frame.createOrReplaceTempView("prov")
        by_type = spark.sql("SELECT event_type, count(*) FROM prov GROUP BY 1 ORDER BY 1").collect()
        _, by = repo.sql("SELECT event_type, count(*) FROM provenance GROUP BY 1 ORDER BY 1")
        assert [tuple(r) for r in by_type] == by


def test_datasource_write_records_its_sends_in_a_repository_on_minio(
    spark: Any, minio: S3Endpoint
) -> None:
    """The data source commits in a Spark Python worker; its provenance must reach the
    repository with the session's s3a settings (no AWS_* variables here to fall back on)."""
    import flowledger.spark as fs

    bucket = minio.new_bucket()
    repo_uri, uri = f"s3://{bucket}/repo", f"s3a://{bucket}/tables/ds"
    fs.register(spark)
    frame = spark.range(0, 20).selectExpr("id", "id % 2 as p")
    frame.write.format("flowledger").mode("append").option("partitionBy", "p").option(
        "repo", repo_uri
    ).save(uri)
    snap = Table.open(open_store(uri, minio.settings())).snapshot()
    assert snap.files
    with ProvenanceRepository.open(open_store(repo_uri, minio.settings())) as repo:
        sends = [e for e in repo.get_events(0, 100) if e.event_type == "SEND"]
    assert sorted(e.transit_uri or "" for e in sends) == sorted(
        f"{uri}/{f.path}" for f in snap.files
    )


def test_save_lineage_names_the_files_the_job_read(spark: Any, minio: S3Endpoint) -> None:
    """`flowledger.spark.save` writes through the data source (which sees no plan) and passes
    the DataFrame's input files: the job's RECEIVEs reach the lineage of every SEND."""
    import flowledger.spark as fs

    bucket = minio.new_bucket()
    repo_uri, uri = f"s3://{bucket}/repo", f"s3a://{bucket}/tables/orders_ds"
    raw = open_store(f"s3://{bucket}/raw", minio.settings())
    for i in range(3):
        raw.put(f"orders/{i}.csv", f"id,qty\n{i},{i + 1}\n".encode())
    fs.register(spark)
    df = spark.read.option("header", True).csv(f"s3a://{bucket}/raw/orders/")
    inputs = sorted(str(p) for p in df.inputFiles())
    fs.save(df, uri, repo=repo_uri)
    with ProvenanceRepository.open(open_store(repo_uri, minio.settings())) as repo:
        sends = [e for e in repo.get_events(0, 100) if e.event_type == "SEND"]
        receives = [e for e in repo.get_events(0, 100) if e.event_type == "RECEIVE"]
        assert sends and len(receives) == 3
        for send in sends:
            assert input_files(repo, send.flowfile_uuid) == inputs
