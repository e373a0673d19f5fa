"""Spark's s3a connector: fetch hadoop-aws and its AWS SDK bundle from Maven Central, cached.

PySpark bundles Hadoop's client but no S3 support. s3a needs `org.apache.hadoop:hadoop-aws`
of exactly the bundled Hadoop version (and its SDK bundle, ~690 MB). They are resolved once with
the machine's Maven client (`infra/spark/pom.xml`) into `~/.cache/flowledger/spark-jars/`.

    python -m infra.spark jars     # fetch (idempotent) and print the jar directory
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

POM = Path(__file__).resolve().parent / "spark" / "pom.xml"


class SparkSetupError(RuntimeError):
    """The s3a jars could not be resolved."""


def cache_root() -> Path:
    return Path(os.environ.get("FLOWLEDGER_CACHE", Path.home() / ".cache" / "flowledger"))


def bundled_hadoop_version() -> str:
    """The Hadoop version inside the installed PySpark (from its hadoop-client-api jar)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        match = re.match(r"hadoop-client-api-(.+)\.jar", jar.name)
        if match:
            return match.group(1)
    raise SparkSetupError(f"no hadoop-client-api jar in {jars}; is pyspark installed?")


def jars_dir(hadoop_version: str | None = None) -> Path:
    return cache_root() / "spark-jars" / f"hadoop-{hadoop_version or bundled_hadoop_version()}"


def fetch_jars(hadoop_version: str | None = None) -> Path:
    """Resolve hadoop-aws + SDK bundle into the cache (idempotent, safe to run concurrently)."""
    version = hadoop_version or bundled_hadoop_version()
    target = jars_dir(version)
    done = target / ".complete"
    if done.exists():
        return target
    if shutil.which("mvn") is None:
        raise SparkSetupError("Maven (`mvn`) is needed to fetch hadoop-aws; install maven")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return target
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            "mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-Dhadoop.version={version}",
            f"-DoutputDirectory={staging}",
        ]  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr)[-2000:]
            raise SparkSetupError(f"mvn could not resolve hadoop-aws {version}:\n{tail}")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        done.touch()
    return target


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
