"""Spark's s3a connector: fetch hadoop-aws and its AWS SDK bundle from Maven Central, cached.

PySpark bundles Hadoop's client but no S3 support. s3a needs `org.apache.hadoop:hadoop-aws`
of exactly the bundled Hadoop version (and its SDK bundle, ~690 MB). They are resolved once with
the machine's Maven client (`infra/spark/pom.xml`) into `~/.cache/flowledger/spark-jars/`.

    python -m infra.spark jars     # fetch (idempotent) and print the jar directory
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flowledger import toolcache
from infra.cache import MavenFetchError, fetch_maven

POM = Path(__file__).resolve().parent / "spark" / "pom.xml"


class SparkSetupError(RuntimeError):
    """The s3a jars could not be resolved."""


def bundled_hadoop_version() -> str:
    """The Hadoop version inside the installed PySpark (SparkSetupError without one)."""
    try:
        return toolcache.bundled_hadoop_version()
    except FileNotFoundError as exc:
        raise SparkSetupError(f"{exc}; is pyspark installed?") from exc


def jars_dir(hadoop_version: str | None = None) -> Path:
    return toolcache.spark_jars_dir(hadoop_version or bundled_hadoop_version())


def fetch_jars(hadoop_version: str | None = None) -> Path:
    """Resolve hadoop-aws + SDK bundle into the cache (idempotent, safe to run concurrently)."""
    version = hadoop_version or bundled_hadoop_version()
    try:
        return fetch_maven(
            POM, jars_dir(version), {"hadoop.version": version}, f"hadoop-aws {version}"
        )
    except MavenFetchError as exc:
        raise SparkSetupError(str(exc)) from exc


def jar_paths(hadoop_version: str | None = None) -> list[Path]:
    directory = jars_dir(hadoop_version)
    if not (directory / ".complete").exists():
        raise SparkSetupError(f"s3a jars missing in {directory}; run `make spark-jars`")
    return sorted(directory.glob("*.jar"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m infra.spark")
    parser.add_argument("command", choices=["jars"])
    parser.parse_args(argv)
    try:
        print(fetch_jars())
    except SparkSetupError as exc:
        print(f"infra.spark: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc


if __name__ == "__main__":
    main()
