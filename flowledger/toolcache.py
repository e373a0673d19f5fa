"""flowledger's tool cache: where the built MinIO binary and the fetched Spark jars live, and
which Hadoop version PySpark bundles (so which s3a jars match it).

Stdlib only, and `flowledger/__init__` imports nothing: the source checkout's `infra/` imports
this module too (one copy), also from a Python without flowledger's dependencies.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def cache_root() -> Path:
    """Where built and fetched tools live: $FLOWLEDGER_CACHE, else ~/.cache/flowledger."""
    override = os.environ.get("FLOWLEDGER_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "flowledger"


def spark_jars_dir(hadoop_version: str) -> Path:
    """The s3a jars (hadoop-aws + AWS SDK bundle) for one Hadoop version."""
    return cache_root() / "spark-jars" / f"hadoop-{hadoop_version}"


def bundled_hadoop_version() -> str:
    """The Hadoop version inside the installed PySpark (from its hadoop-client-api jar).

    FileNotFoundError naming the folder when PySpark has no such jar; ImportError without
    PySpark."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        match = re.match(r"hadoop-client-api-(.+)\.jar", jar.name)
        if match:
            return match.group(1)
    raise FileNotFoundError(f"no hadoop-client-api jar in {jars}")
