"""The OpenLineage Spark listener jar from Maven Central, cached like the s3a jars.

Only the real-listener test and users trying the listener need it (see docs/spark.md,
"Provenance"). The jar is shaded, so it is fetched without transitive dependencies.

    python -m infra.openlineage jar     # fetch (idempotent) and print the jar's path
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infra.cache import MavenFetchError, cache_root, fetch_maven
from infra.spark import SparkSetupError

POM = Path(__file__).resolve().parent / "openlineage" / "pom.xml"
#: Works with PySpark 4.x (Scala 2.13) and has the file transport.
VERSION = "1.53.0"


def jar_dir(version: str = VERSION) -> Path:
    return cache_root() / "openlineage" / version


def fetch_jar(version: str = VERSION) -> Path:
    """Resolve `io.openlineage:openlineage-spark_2.13` into the cache; returns the jar."""
    try:
        target = fetch_maven(
            POM,
            jar_dir(version),
            {"openlineage.version": version},
            f"openlineage-spark {version}",
            transitive=False,  # the jar is shaded
        )
    except MavenFetchError as exc:
        raise SparkSetupError(str(exc)) from exc
    jars = sorted(target.glob("openlineage-spark_*.jar"))
    if not jars:
        raise SparkSetupError(f"no openlineage-spark jar in {target}; delete it and retry")
    return jars[0]


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
