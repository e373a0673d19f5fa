"""PySpark integration: tables written through the timeline and the provenance Spark jobs leave.

See docs/spark.md. Importing this package does not import pyspark; the functions that need it do.
"""

from typing import Any

from .commit_info import CommitInfo, OutputFile, SparkJobInfo, add_commit_hook, commit_hooks
from .errors import (
    HadoopVersionMismatch,
    JarsUnavailable,
    JavaNotFound,
    SparkSetupError,
    SparkWriteError,
)
from .native import write
from .reader import read
from .session import session


def register(spark: Any) -> None:
    """Register the "flowledger" data source on `spark` (`session()` already does)."""
    from .datasource import register as _register

    _register(spark)


__all__ = [
    "CommitInfo",
    "HadoopVersionMismatch",
    "JarsUnavailable",
    "JavaNotFound",
    "OutputFile",
    "SparkJobInfo",
    "SparkSetupError",
    "SparkWriteError",
    "add_commit_hook",
    "commit_hooks",
    "read",
    "register",
    "session",
    "write",
]
