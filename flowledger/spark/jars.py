"""The s3a jars (hadoop-aws of PySpark's Hadoop version + AWS SDK bundle) for a session.

They live in flowledger's cache (`~/.cache/flowledger/spark-jars/hadoop-<version>`, filled by
`make spark-jars` with Maven). From a source checkout the session fetches them on first use;
an installed flowledger without Maven asks Spark to resolve them from Maven Central (Ivy).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from .. import toolcache
from .errors import HadoopVersionMismatch, JarsUnavailable, JavaNotFound

_HADOOP_AWS = re.compile(r"hadoop-aws-(\d+\.\d+\.\d+)\.jar")


def bundled_hadoop_version() -> str:
    """The Hadoop version PySpark bundles (JarsUnavailable when it has no Hadoop client)."""
    try:
        return toolcache.bundled_hadoop_version()
    except FileNotFoundError as exc:
        raise JarsUnavailable(f"{exc}: reinstall pyspark") from exc


def check_java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        where = f"JAVA_HOME={home} has no bin/java" if home else "no `java` on PATH"
        raise JavaNotFound(
            f"Spark needs Java 17 or 21 ({where}): install a JDK (e.g. `apt-get install "
            "openjdk-17-jre-headless`) or set JAVA_HOME"
        )
    return java


def cached_jars(version: str) -> list[Path] | None:
    directory = toolcache.spark_jars_dir(version)
    if not (directory / ".complete").exists():
        return None
    return sorted(directory.glob("*.jar"))


def s3a_jars(fetch: bool) -> list[Path] | None:
    """Cached jars; fetched with Maven first if `fetch` and a source checkout is at hand.

    None: not cached and not fetched (the caller may let Spark resolve `spark.jars.packages`).
    """
    version = bundled_hadoop_version()
    jars = cached_jars(version)
    if jars is not None or not fetch:
        return jars
    try:
        from infra.spark import SparkSetupError, fetch_jars  # source checkout only
    except ImportError:
        return None
    try:
        fetch_jars(version)
    except SparkSetupError as exc:
        first = str(exc).splitlines()[0]
        raise JarsUnavailable(
            f"s3a jars (hadoop-aws {version}) are not cached and could not be fetched "
            f"({first}); run `make spark-jars` where Maven Central is reachable, or point "
            "FLOWLEDGER_CACHE at a cache that has them"
        ) from exc
    return cached_jars(version)


def check_hadoop_aws(conf: Mapping[str, str]) -> None:
    """hadoop-aws must be exactly the Hadoop version PySpark bundles (else NoSuchMethodError
    deep in the first s3a call)."""
    version = bundled_hadoop_version()
    named = ",".join(conf.get(k, "") for k in ("spark.jars", "spark.jars.packages"))
    found = set(_HADOOP_AWS.findall(named))
    found |= set(re.findall(r"org\.apache\.hadoop:hadoop-aws:([\w.\-]+)", named))
    wrong = sorted(v for v in found if v != version)
    if wrong:
        raise HadoopVersionMismatch(
            f"hadoop-aws {wrong[0]} does not match the Hadoop {version} bundled with PySpark: "
            f"use org.apache.hadoop:hadoop-aws:{version} (or drop it and let "
            "flowledger.spark.session add the cached jars)"
        )
