"""`flowledger.spark.session`: one SparkSession factory with s3a and the data source set up."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from storage import StoreSettings
from storage.s3a import s3a_conf
from storage.uri import parse_uri, resolve_repo

from .commit_info import REPO_CONF_KEY
from .jars import bundled_hadoop_version, check_hadoop_aws, check_java, s3a_jars


def session_conf(repo: str | None, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The options `session` sets (before the caller's `conf`, which wins)."""
    repo_uri = resolve_repo(repo)
    is_s3 = parse_uri(repo_uri).scheme == "s3"
    out: dict[str, str] = {
        REPO_CONF_KEY: repo_uri,
        # Python workers must run flowledger's interpreter (the data source runs in them).
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # Spark's default INT96 timestamps carry no Parquet min/max statistics, so commit
        # metadata could not skip files by time; micros are what Iceberg writes too.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    }
    out.update(s3a_conf(StoreSettings()))
    jars = s3a_jars(fetch=is_s3)
    if jars:
        out["spark.jars"] = ",".join(str(j) for j in jars)
    elif is_s3:
        out["spark.jars.packages"] = f"org.apache.hadoop:hadoop-aws:{bundled_hadoop_version()}"
    out.update(conf or {})
    return out


def session(
    repo: str | None = None,
    master: str | None = None,
    app_name: str = "flowledger",
    conf: Mapping[str, str] | None = None,
) -> Any:
    """A SparkSession (local mode unless `master`) that reads and writes flowledger tables.

    s3a options come from the same AWS variables and settings as the rest of flowledger; the
    "flowledger" data source is registered; `repo` (else $FLOWLEDGER_REPO, else
    ./flowledger-data) is where the session's writes report provenance.
    """
    check_java()
    options = session_conf(repo, conf)
    check_hadoop_aws(options)
    # PySpark takes the Python of its workers (and of the data source's planner and commit
    # workers) from $PYSPARK_PYTHON when the SparkContext starts, not from the conf alone.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master or "local[*]").appName(app_name)
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    from .datasource import register

    register(spark)
    return spark
