"""A keyed write whose input is a plain Parquet scan reads the files itself (direct_scan.py):
the load and the append write the rows the Python path writes, from local files and over
s3a; anything that is not a plain scan, or a file Spark reads differently, takes Spark's
rows; a session in another time zone writes the timestamps the Python path writes."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import flowledger.spark as fs
from flowledger.spark import direct_scan
from flowledger.spark.commit_info import JOB_METADATA_KEY, SparkJobInfo
from flowledger.spark.direct_scan import DIRECT_CONF, parquet_scan
from flowledger.spark.small_input import STREAM_THRESHOLD_CONF, THRESHOLD_CONF
from storage import open_store
from tests.support.keyed_spark import PROPS, comparable
from tests.support.servers import S3Endpoint
from timeline import KeyedProperties, Table

pytestmark = pytest.mark.spark

DIRECT = "read directly from"
KEYED = KeyedProperties.of("id", ordering_field="ts", partition_by="p", merge_mode="event_time")


def _rows(first: int, n: int, ts: int = 1) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array([i % 4 for i in ids], pa.int64()),
            "v": pa.array([i * 10 for i in ids], pa.int64()),
            "ts": pa.array([ts] * n, pa.int64()),
        }
    )


def _files(folder: Path, *parts: pa.Table) -> Path:
    """`parts` as Parquet files of one folder (two row groups each), read by Spark as one."""
    folder.mkdir(parents=True)
    for k, part in enumerate(parts):
        pq.write_table(part, folder / f"part-{k}.parquet", row_group_size=max(1, len(part) // 2))
    return folder


def _python(root: Path, *steps: pa.Table) -> tuple[Table, list[str]]:
    """The Python path: each step inserted as a stream of its record batches."""
    table = Table.create(open_store(str(root)), KEYED)
    instants = [table.insert(pa.RecordBatchReader.from_stream(s)).time for s in steps]
    return table, instants


@pytest.fixture
def direct_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="flowledger.spark")
    return caplog


def _insert(spark: Any, folder: Path | str, uri: str, df: Any = None) -> str:
    df = spark.read.parquet(str(folder)) if df is None else df
    return fs.save(df, uri, options={**PROPS, "operation": "insert"}).instant_time


def test_a_plain_scan_load_and_append_write_what_the_python_path_writes(
    registered: Any, tmp_path: Path, direct_log: pytest.LogCaptureFixture
) -> None:
    load = _files(tmp_path / "load", _rows(0, 300), _rows(300, 200))
    append = _files(tmp_path / "append", _rows(500, 40, ts=2))
    uri = str(tmp_path / "spark")
    assert parquet_scan(registered.read.parquet(str(load)).select("v", "id", "p", "ts"))
    instants = [_insert(registered, load, uri), _insert(registered, append, uri)]
    assert direct_log.text.count(DIRECT) == 2
    reference = _python(
        tmp_path / "python", pa.concat_tables([_rows(0, 300), _rows(300, 200)]), _rows(500, 40, 2)
    )
    table = Table.open(open_store(uri))
    assert comparable(table, instants) == comparable(*reference)
    # The job's inputs are recorded as Spark names them, as on Spark's path.
    job = SparkJobInfo.from_json(table.entry(instants[0]).extra[JOB_METADATA_KEY])
    assert sorted(job.input_files) == sorted(registered.read.parquet(str(load)).inputFiles())
    assert len(job.input_files) == 2


def test_what_is_not_a_plain_scan_takes_sparks_rows(
    registered: Any, tmp_path: Path, direct_log: pytest.LogCaptureFixture
) -> None:
    load = _files(tmp_path / "load", _rows(0, 100))
    df = registered.read.parquet(str(load))
    filtered, computed = df.filter("id >= 50"), df.withColumn("v", df.v + 1)
    assert parquet_scan(filtered) is None and parquet_scan(computed) is None
    assert parquet_scan(df.join(df.select("id"), "id")) is None
    cached = registered.read.parquet(str(load)).cache()
    cached.count()
    assert parquet_scan(cached) is None  # its plan is the cache, which names no files
    cached.unpersist()
    hive = _files(tmp_path / "hive" / "q=1", _rows(0, 10))  # q comes from the folder
    assert parquet_scan(registered.read.parquet(str(hive.parent))) is None
    uri = str(tmp_path / "spark")
    instants = [_insert(registered, load, uri, filtered)]
    assert DIRECT not in direct_log.text
    reference = _python(
        tmp_path / "python", _rows(0, 100).filter(pa.array([i >= 50 for i in range(100)]))
    )
    assert comparable(Table.open(open_store(uri)), instants) == comparable(*reference)


def test_a_file_spark_reads_differently_falls_back(
    registered: Any, tmp_path: Path, direct_log: pytest.LogCaptureFixture
) -> None:
    # The second file lacks column v: Spark reads it as nulls, the direct reader refuses it.
    load = _files(tmp_path / "load", _rows(0, 50), _rows(50, 50).drop_columns(["v"]))
    uri = str(tmp_path / "spark")
    instants = [_insert(registered, load, uri)]
    assert DIRECT not in direct_log.text and "column 'v' not found" in direct_log.text
    second = _rows(50, 50).set_column(2, "v", pa.nulls(50, pa.int64()))
    reference = _python(tmp_path / "python", pa.concat_tables([_rows(0, 50), second]))
    assert comparable(Table.open(open_store(uri)), instants) == comparable(*reference)


def test_a_key_in_two_files_is_combined_as_in_one_table(
    registered: Any, tmp_path: Path, direct_log: pytest.LogCaptureFixture
) -> None:
    # Key 5 is in both files: a stream cannot combine it across its batches, a table can
    # (the higher ts wins under event_time), so the write takes Spark's rows.
    first, second = _rows(0, 10), _rows(5, 1, ts=9)
    load = _files(tmp_path / "load", first, second)
    uri = str(tmp_path / "spark")
    instants = [_insert(registered, load, uri)]
    assert DIRECT not in direct_log.text and "repeated in two batches" in direct_log.text
    reference = _python(tmp_path / "python", pa.concat_tables([first, second]).combine_chunks())
    got = comparable(Table.open(open_store(uri)), instants)
    assert got == comparable(*reference)
    assert [r[:4] for r in got if r[0] == 5] == [(5, 1, 50, 9)]


def test_off_by_setting(registered: Any, tmp_path: Path) -> None:
    load = _files(tmp_path / "load", _rows(0, 10))
    registered.conf.set(DIRECT_CONF, "false")
    try:
        assert parquet_scan(registered.read.parquet(str(load))) is None
    finally:
        registered.conf.unset(DIRECT_CONF)


def test_an_insert_larger_than_the_stream_threshold_is_written_by_tasks(
    registered: Any, tmp_path: Path, direct_log: pytest.LogCaptureFixture
) -> None:
    load = _files(tmp_path / "load", _rows(0, 200), _rows(200, 100))
    uri = str(tmp_path / "spark")
    registered.conf.set(STREAM_THRESHOLD_CONF, "1")  # every input is larger than one byte
    try:
        instants = [_insert(registered, load, uri)]
    finally:
        registered.conf.unset(STREAM_THRESHOLD_CONF)
    assert DIRECT not in direct_log.text
    reference = _python(tmp_path / "python", pa.concat_tables([_rows(0, 200), _rows(200, 100)]))
    assert comparable(Table.open(open_store(uri)), instants) == comparable(*reference)


@pytest.fixture
def new_york(registered: Any) -> Iterator[Any]:
    before = registered.conf.get("spark.sql.session.timeZone")
    registered.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield registered
    registered.conf.set("spark.sql.session.timeZone", before)


def _stamped(first: int, n: int) -> pa.Table:
    at = dt.datetime(2026, 3, 8, 6, 30, tzinfo=dt.UTC)  # around New York's DST change
    when = [at + dt.timedelta(hours=i) for i in range(n)]
    return _rows(first, n).append_column("at", pa.array(when, pa.timestamp("us", tz="UTC")))


@pytest.mark.parametrize("path", ["direct", "spark rows", "on the driver"])
def test_a_session_in_another_time_zone_writes_the_python_paths_timestamps(
    new_york: Any, tmp_path: Path, path: str, direct_log: pytest.LogCaptureFixture
) -> None:
    data = _stamped(0, 12)
    load = _files(tmp_path / "load", data)
    df = new_york.read.parquet(str(load))
    if path != "direct":
        df = df.filter("id >= 0")  # not a plain scan: Spark's rows
    uri = str(tmp_path / "spark")
    if path == "on the driver":
        new_york.conf.set(THRESHOLD_CONF, str(10 * 1024 * 1024))
    try:
        _insert(new_york, load, uri, df)
    finally:
        new_york.conf.set(THRESHOLD_CONF, "-1")
    assert (DIRECT in direct_log.text) == (path == "direct")
    python, _ = _python(tmp_path / "python", data)
    got, want = Table.open(open_store(uri)).read(), python.read()
    assert (
        got.schema.field("at").type == want.schema.field("at").type == data.schema.field("at").type
    )
    assert sorted(zip(got["id"].to_pylist(), got["at"].to_pylist(), strict=True)) == sorted(
        zip(want["id"].to_pylist(), want["at"].to_pylist(), strict=True)
    )


@pytest.mark.minio
def test_input_files_over_s3a_are_read_with_the_sessions_credentials(
    registered: Any,
    tmp_path: Path,
    minio: S3Endpoint,
    direct_log: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read through one store client for the bucket, however many files the scan has."""
    bucket = minio.new_bucket()
    frame = registered.createDataFrame(_rows(0, 60).to_pandas()).repartition(3)
    frame.write.parquet(f"s3a://{bucket}/in")
    uri = f"s3a://{bucket}/tables/t"
    asked: list[str] = []

    def counted(uri: str, settings: Any = None) -> Any:
        asked.append(uri)
        return open_store(uri, settings)

    monkeypatch.setattr(direct_scan, "open_store", counted)
    instants = [_insert(registered, f"s3a://{bucket}/in", uri)]
    assert DIRECT in direct_log.text
    scan = parquet_scan(registered.read.parquet(f"s3a://{bucket}/in"))
    assert scan is not None and len(scan.files) == 3
    assert asked == [f"s3://{bucket}"]
    reference = _python(tmp_path / "python", _rows(0, 60))
    with closing(open_store(f"s3://{bucket}/tables/t", minio.settings())) as store:
        assert comparable(Table.open(store), instants) == comparable(*reference)
