"""The session factory's setup errors are one actionable line, checked before a JVM starts."""

from __future__ import annotations

from pathlib import Path

import pytest

import flowledger.spark as fs
from flowledger.output import one_line
from flowledger.spark.conf import store_settings, table_settings
from flowledger.spark.errors import SparkWriteError
from flowledger.spark.jars import bundled_hadoop_version, check_hadoop_aws
from flowledger.spark.native import is_data_file, partition_of
from flowledger.spark.paths import table_path
from flowledger.spark.session import session_conf
from timeline import HIVE_NAMING, LEGACY_NAMING

pytestmark = pytest.mark.unit


def test_missing_java_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(fs.JavaNotFound) as err:
        fs.session()
    assert "JAVA_HOME" in str(err.value) and "\n" not in one_line(err.value)


def test_hadoop_aws_of_another_version_is_refused() -> None:
    wrong = "/jars/hadoop-aws-3.3.4.jar,/jars/bundle.jar"
    with pytest.raises(fs.HadoopVersionMismatch, match=r"3\.3\.4 does not match"):
        check_hadoop_aws({"spark.jars": wrong})
    with pytest.raises(fs.HadoopVersionMismatch):
        check_hadoop_aws({"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.3.4"})
    check_hadoop_aws({"spark.jars": f"/jars/hadoop-aws-{bundled_hadoop_version()}.jar"})


def test_unfetchable_jars_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLOWLEDGER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn
    with pytest.raises(fs.JarsUnavailable, match="make spark-jars"):
        session_conf("s3://bucket/repo")
    # A local repository needs no jars: none are fetched, the session still starts.
    assert "spark.jars" not in session_conf(str(tmp_path / "repo"))


def test_uris_map_to_store_and_spark_paths(tmp_path: Path) -> None:
    for given in ("s3a://b-1/t/x", "s3://b-1/t/x"):
        p = table_path(given)
        assert (p.store_uri, p.spark_uri) == ("s3://b-1/t/x", "s3a://b-1/t/x")
    local = table_path(str(tmp_path / "t"))
    assert local.store_uri == local.spark_uri == f"file://{tmp_path}/t"
    via_scheme = table_path(f"file://{tmp_path}/t")
    assert (via_scheme.store_uri, via_scheme.spark_uri) == (local.store_uri, local.spark_uri)


def test_settings_follow_the_sessions_s3a_conf() -> None:
    s = store_settings(
        {
            "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
            "spark.hadoop.fs.s3a.access.key": "ak",
            "spark.hadoop.fs.s3a.secret.key": "sk",
            "spark.hadoop.fs.s3a.path.style.access": "true",
        }
    )
    assert (s.endpoint_url, s.access_key_id, s.path_style_access) == (
        "http://127.0.0.1:9000", "ak", True,
    )  # fmt: skip
    t = table_settings(
        {"spark.flowledger.hoodie.cleaner.policy.failed.writes": "eager"},
        {"hoodie.client.heartbeat.interval_in_ms": "1000"},
    )
    assert (t.failed_writes_cleaner_policy, t.heartbeat_interval_ms) == ("EAGER", 1000)


def test_the_data_file_codec_comes_from_the_conf_or_a_writer_option() -> None:
    conf = {"spark.flowledger.hoodie.parquet.compression.codec": "snappy"}
    assert table_settings(conf).parquet_compression_codec == "snappy"
    option = {"hoodie.parquet.compression.codec": "LZ4"}
    assert table_settings(conf, option).parquet_compression_codec == "lz4"
    assert table_settings({}).parquet_compression_codec == "zstd"
    with pytest.raises(SparkWriteError) as err:
        table_settings({}, {"hoodie.parquet.compression.codec": "lzo"})
    assert str(err.value).startswith(
        "parquet_compression_codec must be one of zstd, snappy, gzip, lz4, uncompressed, "
        "not 'lzo' (options "
    )


def test_spark_output_names_map_to_partitions() -> None:
    spark_dirs = "__flp_p=1/__flp_d=a%20b%2Fc%3D/part-0.parquet"
    assert partition_of(spark_dirs, HIVE_NAMING) == "p=1/d=a%20b%2Fc%3D"
    assert partition_of(spark_dirs, LEGACY_NAMING) == "p=1/d=a_b_c_"
    assert partition_of("part-0.snappy.parquet", HIVE_NAMING) == ""
    assert is_data_file("__flp_p=1/part-0.snappy.parquet")
    assert not is_data_file("_SUCCESS") and not is_data_file(".part-0.parquet.crc")
    assert not is_data_file("_temporary/0/part-0.parquet")


def test_session_writes_timestamps_with_statistics_unless_told_otherwise(tmp_path: Path) -> None:
    """INT96 (Spark's default) has no Parquet min/max, so commits could not prune by time."""
    key = "spark.sql.parquet.outputTimestampType"
    assert session_conf(str(tmp_path / "repo"))[key] == "TIMESTAMP_MICROS"
    assert session_conf(str(tmp_path / "repo"), {key: "INT96"})[key] == "INT96"
