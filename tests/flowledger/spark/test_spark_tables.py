"""Spark writes tables through the timeline (data source and native writer) and reads exactly
the committed files; Spark, DuckDB (over the same files), pyarrow and the CLI agree."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

import flowledger.spark as fs
from flowledger.cli import app
from flowledger.spark.commit_info import JOB_METADATA_KEY, SparkJobInfo
from flowledger.spark.session import session_conf
from storage import IntegrityError, open_store
from timeline import CommitUnknownOutcome, SchemaMismatch, Table, Transaction
from timeline.layout import data_prefix

pytestmark = pytest.mark.spark


def _table(uri: str, settings: Any) -> Table:
    return Table.open(open_store(uri, settings))


def _duckdb_count(table: Table, tmp: Path) -> int:
    """DuckDB over local copies of exactly the snapshot's files."""
    paths = []
    for i, f in enumerate(table.snapshot().files):
        p = tmp / f"f{i}.parquet"
        p.write_bytes(table.store.get(f.path))
        paths.append(str(p))
    if not paths:
        return 0
    rows = duckdb.sql(f"select count(*) from read_parquet({paths!r})").fetchall()
    return int(rows[0][0])


def _cli_count(uri: str, settings: Any, monkeypatch: pytest.MonkeyPatch) -> int:
    if settings is not None:
        monkeypatch.setenv("AWS_ENDPOINT_URL", settings.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", settings.access_key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", settings.secret_access_key)
        monkeypatch.setenv("AWS_REGION", settings.region)
    result = CliRunner().invoke(app, ["table", "read", uri, "--count", "--json"])
    assert result.exit_code == 0, result.output
    return int(json.loads(result.stdout)["rows"])


def _frame(spark: Any, start: int, end: int) -> Any:
    return spark.range(start, end).selectExpr("id", "id % 3 as p", "cast(id as string) as s")


def _agree(spark: Any, uri: str, settings: Any, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Row count the four readers agree on (and Spark's rows carry every column)."""
    table = _table(uri, settings)
    counts = {
        "spark": fs.read(spark, uri).count(),
        "datasource": spark.read.format("flowledger").load(uri).count(),
        "pyarrow": table.read().num_rows,
        "duckdb": _duckdb_count(table, tmp),
        "cli": _cli_count(uri, settings, monkeypatch),
    }
    assert len(set(counts.values())) == 1, counts
    assert set(fs.read(spark, uri).columns) == {"id", "p", "s"}
    return counts["spark"]


def _assert_only_committed_files(table: Table) -> None:
    added = [f for e in table.state().writes.values() for f in e.added]
    assert {o.key for o in table.store.list("data/")} == {f.path for f in added}
    # Every committed file carries the crc32 readers verify (table.read() checks it).
    assert all(f.checksum.startswith("crc32:") for f in added)


def test_native_writes_append_overwrite_partitioned(
    registered: Any, where: tuple[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark, (uri, settings) = registered, where
    first = fs.write(_frame(spark, 0, 30), uri, partition_by="p")
    fs.write(_frame(spark, 30, 50), uri, mode="append", partition_by=["p"])
    assert (first.action, first.rows) == ("commit", 30)
    assert _agree(spark, uri, settings, tmp_path, monkeypatch) == 50

    # Partitioned overwrite replaces only the partitions it writes (p=0 here).
    over = fs.write(_frame(spark, 100, 106).where("p = 0"), uri, "overwrite", partition_by="p")
    assert over.action == "replacecommit" and {f.partition for f in over.files} == {"p=0"}
    kept = _frame(spark, 0, 50).where("p != 0").count()
    assert _agree(spark, uri, settings, tmp_path, monkeypatch) == kept + 2

    # Time travel to the first commit, and a whole-table overwrite.
    assert fs.read(spark, uri, as_of=first.instant_time).count() == 30
    fs.write(_frame(spark, 0, 7), uri, mode="overwrite")
    assert _agree(spark, uri, settings, tmp_path, monkeypatch) == 7

    # Only committed files remain under each instant's prefix (no _SUCCESS, .crc, _temporary).
    _assert_only_committed_files(_table(uri, settings))


def test_datasource_writes_append_overwrite_partitioned(
    registered: Any, where: tuple[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark, (uri, settings) = registered, where
    appender = _frame(spark, 0, 30).write.format("flowledger").mode("append")
    appender.option("partitionBy", "p").save(uri)
    first = _table(uri, settings).snapshot().instant_time
    _frame(spark, 30, 50).write.format("flowledger").mode("append").option("partitionBy", "p").save(
        uri
    )
    assert _agree(spark, uri, settings, tmp_path, monkeypatch) == 50

    _frame(spark, 100, 106).where("p = 0").write.format("flowledger").mode("overwrite").option(
        "partitionBy", "p"
    ).save(uri)
    kept = _frame(spark, 0, 50).where("p != 0").count()
    assert _agree(spark, uri, settings, tmp_path, monkeypatch) == kept + 2
    snap = _table(uri, settings).snapshot()
    assert {f.partition for f in snap.files} >= {"p=0", "p=1", "p=2"}

    as_of = spark.read.format("flowledger").option("asOf", first).load(uri)
    assert as_of.count() == 30
    _frame(spark, 0, 4).write.format("flowledger").mode("overwrite").save(uri)
    assert _agree(spark, uri, settings, tmp_path, monkeypatch) == 4
    _assert_only_committed_files(_table(uri, settings))


def test_commit_records_job_and_runs_hooks(
    registered: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spark = registered
    src = str(tmp_path / "src")
    spark.range(0, 10).write.parquet(src)
    seen: list[fs.CommitInfo] = []

    def failing(info: fs.CommitInfo) -> None:
        raise RuntimeError("hook broke")

    fs.add_commit_hook(spark, failing)
    fs.add_commit_hook(spark, seen.append)
    uri = str(tmp_path / "t")
    try:
        with caplog.at_level(logging.WARNING):
            info = fs.write(spark.read.parquet(src), uri)
    finally:
        fs.remove_commit_hook(spark, failing)
        fs.remove_commit_hook(spark, seen.append)
    assert seen == [info]  # the failing hook did not stop the next one, nor undo the commit
    assert "hook broke" in caplog.text
    assert fs.read(spark, uri).count() == 10
    job = SparkJobInfo.from_json(_table(uri, None).entry(info.instant_time).extra[JOB_METADATA_KEY])
    assert job.app_id == spark.sparkContext.applicationId
    assert job.input_files and all("src" in p for p in job.input_files)
    assert all(f.uri.startswith("file://") and f.rows for f in info.files)


def test_datasource_write_records_the_input_files_it_is_given(
    registered: Any, tmp_path: Path
) -> None:
    spark = registered
    src = str(tmp_path / "src")
    spark.range(0, 6).coalesce(2).write.parquet(src)
    df = spark.read.parquet(src)
    inputs = sorted(df.inputFiles())
    uri = str(tmp_path / "t")
    df.write.format("flowledger").mode("append").option("inputFiles", ",".join(inputs)).save(uri)
    table = _table(uri, None)
    (entry,) = table.state().ordered_writes()
    job = SparkJobInfo.from_json(entry.extra[JOB_METADATA_KEY])
    assert sorted(job.input_files) == inputs and len(inputs) == 2
    # Without the option a data-source write names no inputs: it sees no plan, and nothing
    # patches PySpark's writer to pass them behind the job's back.
    df.write.format("flowledger").mode("append").save(uri)
    last = _table(uri, None).state().ordered_writes()[-1]
    assert SparkJobInfo.from_json(last.extra[JOB_METADATA_KEY]).input_files == ()
    from pyspark.sql.readwriter import DataFrameWriter

    assert DataFrameWriter.save.__module__ == "pyspark.sql.readwriter"


def test_save_records_the_inputs_from_the_dataframes_plan(registered: Any, tmp_path: Path) -> None:
    spark = registered
    src = str(tmp_path / "src")
    spark.range(0, 6).selectExpr("id", "id % 2 as p").coalesce(2).write.parquet(src)
    df = spark.read.parquet(src)
    uri = str(tmp_path / "t")
    info = fs.save(df, uri, partition_by="p")
    over = fs.save(df.where("p = 0"), uri, mode="overwrite", partition_by=["p"])
    table = _table(uri, None)
    first, second = table.state().ordered_writes()
    # What Spark's commit worker committed, found again on the driver.
    assert (info.instant_time, info.action, info.rows) == (first.time, "commit", 6)
    assert (over.instant_time, over.operation) == (second.time, "insert_overwrite")
    assert {f.partition for f in over.files} == {"p=0"}
    assert sorted(info.job.input_files) == sorted(df.inputFiles())
    for entry in (first, second):
        job = SparkJobInfo.from_json(entry.extra[JOB_METADATA_KEY])
        assert sorted(job.input_files) == sorted(df.inputFiles()) and len(job.input_files) == 2
    assert (first.action, second.action) == ("commit", "replacecommit")
    assert sorted(r.id for r in fs.read(spark, uri).collect()) == [0, 1, 2, 3, 4, 5]
    with pytest.raises(fs.SparkWriteError, match="mode"):
        fs.save(df, uri, mode="upsert")


def test_every_writer_records_the_same_stats_and_partitions(
    registered: Any, tmp_path: Path
) -> None:
    """The native writer (Spark's JVM files, described from their footers), the data source
    (pyarrow in Spark's tasks) and timeline's own writer record the same column statistics
    and name the same partitions for the same rows: one footer-to-stats function, one
    partition naming (bytes as hex, decimals compared as decimals, timestamps in UTC)."""
    spark = registered
    df = spark.sql(
        """SELECT * FROM VALUES
          (1, true, CAST(9.75 AS DECIMAL(10,2)), DATE'2026-01-02',
           TIMESTAMP'2026-01-01 10:00:00', X'FF00', 'z'),
          (2, true, CAST(10.50 AS DECIMAL(10,2)), DATE'2025-12-31',
           TIMESTAMP'2026-01-01 12:00:00', X'01', 'a'),
          (3, false, NULL, NULL, NULL, NULL, NULL)
        AS t(id, flag, amount, day, at, raw, s)"""
    ).coalesce(1)
    uris = {w: str(tmp_path / w) for w in ("native", "datasource", "python")}
    key = "spark.sql.parquet.outputTimestampType"  # as `fs.session` sets it (INT96: no stats)
    spark.conf.set(key, session_conf(str(tmp_path / "repo"))[key])
    try:
        fs.write(df, uris["native"], partition_by="flag")
    finally:
        spark.conf.unset(key)
    fs.save(df, uris["datasource"], partition_by="flag")
    python = Table.open(open_store(uris["python"]))
    python.write(df.toArrow(), partition_by="flag")

    def recorded(uri: str) -> dict[str, Any]:
        files = _table(uri, None).snapshot().files
        assert len({f.partition for f in files}) == len(files)
        return {f.partition: dict(f.column_stats) for f in files}

    got = {w: recorded(uri) for w, uri in uris.items()}
    assert got["native"] == got["datasource"] == got["python"], got
    trues = got["python"]["flag=True"]
    assert trues["amount"] == {"nulls": 0, "min": "9.75", "max": "10.50"}
    assert trues["raw"] == {"nulls": 0, "min": "01", "max": "ff00"}
    assert trues["at"]["min"].endswith("+00:00")
    assert got["python"]["flag=False"]["amount"] == {"nulls": 1}


def test_datasource_reader_verifies_each_files_checksum(registered: Any, tmp_path: Path) -> None:
    spark = registered
    uri = str(tmp_path / "t")
    spark.range(0, 50).write.format("flowledger").mode("append").save(uri)
    assert spark.read.format("flowledger").load(uri).count() == 50
    table = _table(uri, None)
    damaged = table.snapshot().files[0]
    body = bytearray(table.store.get(damaged.path))
    body[5] ^= 0xFF  # in the first page, not the footer (the schema is read from that)
    table.store.put(damaged.path, bytes(body))
    with pytest.raises(Exception, match="is corrupt: checksum") as err:
        spark.read.format("flowledger").load(uri).count()
    assert damaged.path in str(err.value)
    assert fs.read(spark, uri).count() == 50  # the native reader checks only when asked
    with pytest.raises(IntegrityError, match=damaged.path):
        fs.read(spark, uri, verify=True)


def test_failed_job_leaves_snapshot_unchanged(registered: Any, tmp_path: Path) -> None:
    spark = registered
    uri = str(tmp_path / "t")
    fs.write(_frame(spark, 0, 5), uri)
    before = _table(uri, None).snapshot()
    bad = spark.range(0, 5).selectExpr("id", "assert_true(id < 3) as boom")
    with pytest.raises(Exception, match="id < 3"):
        fs.write(bad, uri)
    with pytest.raises(Exception, match="id < 3"):
        bad.write.format("flowledger").mode("append").save(uri)
    # A DataFrame that does not fit the table's schema is refused before any file is written.
    wrong = spark.range(0, 3).selectExpr("cast(id as string) as id", "id % 3 as p", "'x' as s")
    with pytest.raises(SchemaMismatch):
        fs.write(wrong, uri)
    with pytest.raises(Exception, match=r"SchemaMismatch|schema"):
        wrong.write.format("flowledger").mode("append").save(uri)
    table = _table(uri, None)
    assert table.snapshot() == before
    assert not table.timeline().pending()
    assert {o.key for o in table.store.list("data/")} == set(before.paths())


def test_unknown_commit_outcome_keeps_the_write_for_recovery(
    registered: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log PUT may have landed: the writer must not delete files a commit may name."""
    spark, uri = registered, str(tmp_path / "t")

    def unknown(self: Transaction, metadata: Any) -> Any:
        self.detach()  # as the real outcome-unknown path does: left pending, no more beats
        raise CommitUnknownOutcome("log PUT timed out", self.instant_time)

    monkeypatch.setattr(Transaction, "complete", unknown)
    with pytest.raises(CommitUnknownOutcome):
        fs.write(_frame(spark, 0, 5), uri)
    monkeypatch.undo()
    table = _table(uri, None)
    pending = [i.time for i in table.timeline().pending()]
    assert len(pending) == 1
    assert list(table.store.list(data_prefix(pending[0])))  # left for recovery to decide


def test_every_writer_keeps_look_alike_partition_values_apart(
    registered: Any, where: tuple[str, Any]
) -> None:
    """Values a lossy naming folds together are distinct partitions whichever writer wrote
    them (the native writer names its files' partitions from their footers), and reads
    return them as stored. On MinIO the escaped names are S3 keys, `%` included, read over s3a."""
    spark, (base, settings) = registered, where
    values = ["x y", "x_y", "a/b", "x%20y", "é ü", "é_ü", None]
    rows = list(enumerate(values))
    df = spark.createDataFrame(rows, "id int, s string").coalesce(1)
    uris = {w: f"{base}_{w}" for w in ("native", "datasource", "python")}
    fs.write(df, uris["native"], partition_by="s")
    fs.save(df, uris["datasource"], partition_by="s")
    _table(uris["python"], settings).write(df.toArrow(), partition_by="s")
    expected = {
        "s=x%20y", "s=x_y", "s=a%2Fb", "s=x%2520y", "s=é%20ü", "s=é_ü",
        "s=__HIVE_DEFAULT_PARTITION__",
    }  # fmt: skip
    for w, uri in uris.items():
        assert {f.partition for f in _table(uri, settings).snapshot().files} == expected, w
        assert sorted((r.id, r.s) for r in fs.read(spark, uri).collect()) == rows, w


def test_a_column_added_after_the_first_files_is_read_from_every_file(
    spark: Any, tmp_path: Path
) -> None:
    """Spark's Parquet reader is told the table's schema as of the snapshot: left to infer it
    from one file's footer, it dropped a column added after that file was written. Older
    files read it as null, as `Table.read` does; as of an instant before it, it is absent."""
    import pyarrow as pa

    from timeline.keyed import KeyedProperties

    uri = str(tmp_path / "evolved")
    table = Table.create(open_store(uri), KeyedProperties.of("id", partition_by=("p",)))
    first = table.upsert(pa.table({"id": list(range(10)), "p": [i % 2 for i in range(10)]}))
    table.upsert(pa.table({"id": [20, 21], "p": [5, 5], "v": ["x", "y"]}))
    df = fs.read(spark, uri)
    got = sorted((r.id, r.v) for r in df.select("id", "v").collect())
    want = sorted(zip(*table.read().select(["id", "v"]).to_pydict().values(), strict=True))
    assert got == want == [*((i, None) for i in range(10)), (20, "x"), (21, "y")]
    assert "v" not in fs.read(spark, uri, as_of=first.time).columns
    # A type Spark's schema has no equivalent of (unsigned): every footer is merged instead.
    table.upsert(pa.table({"id": [30], "p": [6], "v": ["z"], "n": pa.array([7], pa.uint32())}))
    got_n = sorted((r.id, r.n) for r in fs.read(spark, uri).select("id", "n").collect())
    assert got_n == [*((i, None) for i in (*range(10), 20, 21)), (30, 7)]
