"""PySpark integration: tables written through the timeline and the provenance Spark jobs leave.

See docs/spark.md. Importing this package does not import pyspark; the functions that need it do.
"""

from typing import Any

from provenance.ancestry import input_files, upstream, upstream_events

from .commit_info import (
    JOB_METADATA_KEY,
    REPO_CONF_KEY,
    CommitInfo,
    OutputFile,
    SparkJobInfo,
    add_commit_hook,
    commit_hooks,
    remove_commit_hook,
)
from .compaction import compact
from .errors import (
    HadoopVersionMismatch,
    JarsUnavailable,
    JavaNotFound,
    SparkSetupError,
    SparkWriteError,
)
from .frame import provenance
from .lineage import CommitRecorder, catch_up, events_for_commit, install, record_commit
from .native import write
from .reader import read
from .save import save
from .session import session


def register(spark: Any) -> None:
    """Register the "flowledger" data source on `spark` (`session()` already does)."""
    from .datasource import register as _register

    _register(spark)


__all__ = [
    "JOB_METADATA_KEY",
    "REPO_CONF_KEY",
    "CommitInfo",
    "CommitRecorder",
    "HadoopVersionMismatch",
    "JarsUnavailable",
    "JavaNotFound",
    "OutputFile",
    "SparkJobInfo",
    "SparkSetupError",
    "SparkWriteError",
    "add_commit_hook",
    "catch_up",
    "commit_hooks",
    "compact",
    "events_for_commit",
    "input_files",
    "install",
    "provenance",
    "read",
    "record_commit",
    "register",
    "remove_commit_hook",
    "save",
    "session",
    "upstream",
    "upstream_events",
    "write",
]
