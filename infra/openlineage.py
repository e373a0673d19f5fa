"""The OpenLineage Spark listener jar from Maven Central, cached like the s3a jars.

Only the real-listener test and users trying the listener need it (see docs/spark.md,
"Provenance"). The jar is shaded, so it is fetched without transitive dependencies.

    python -m infra.openlineage jar     # fetch (idempotent) and print the jar's path
"""

from __future__ import annotations

import argparse
import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

from infra.spark import SparkSetupError, cache_root

POM = Path(__file__).resolve().parent / "openlineage" / "pom.xml"
#: Works with PySpark 4.x (Scala 2.13) and has the file transport.
VERSION = "1.53.0"


def jar_dir(version: str = VERSION) -> Path:
    return cache_root() / "openlineage" / version


def fetch_jar(version: str = VERSION) -> Path:
    """Resolve `io.openlineage:openlineage-spark_2.13` into the cache; returns the jar."""
    target = jar_dir(version)
    done = target / ".complete"
    if not done.exists():
        if shutil.which("mvn") is None:
            raise SparkSetupError("Maven (`mvn`) is needed to fetch openlineage-spark")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                _resolve(version, target)
    jars = sorted(target.glob("openlineage-spark_*.jar"))
    if not jars:
        raise SparkSetupError(f"no openlineage-spark jar in {target}; delete it and retry")
    return jars[0]


def _resolve(version: str, target: Path) -> None:
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        "mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
        "-DincludeScope=runtime", "-DexcludeTransitive=true",
        f"-Dopenlineage.version={version}", f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-2000:]
        raise SparkSetupError(f"mvn could not resolve openlineage-spark {version}:\n{tail}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / ".complete").touch()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m infra.openlineage")
    parser.add_argument("command", choices=["jar"])
    parser.parse_args(argv)
    try:
        print(fetch_jar())
    except SparkSetupError as exc:
        print(f"infra.openlineage: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc


if __name__ == "__main__":
    main()
