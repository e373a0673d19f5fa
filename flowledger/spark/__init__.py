"""PySpark integration: tables written through the timeline and the provenance Spark jobs leave.

See docs/spark.md. Importing this package does not import pyspark; the functions that need it do.
"""

from provenance.ancestry import input_files, upstream, upstream_events

from .commit_info import (
    JOB_METADATA_KEY,
    REPO_CONF_KEY,
    CommitInfo,
    OutputFile,
    SparkJobInfo,
    add_commit_hook,
    commit_hooks,
)
from .frame import provenance
from .lineage import catch_up, events_for_commit, install, record_commit

__all__ = [
    "JOB_METADATA_KEY",
    "REPO_CONF_KEY",
    "CommitInfo",
    "OutputFile",
    "SparkJobInfo",
    "add_commit_hook",
    "catch_up",
    "commit_hooks",
    "events_for_commit",
    "input_files",
    "install",
    "provenance",
    "record_commit",
    "upstream",
    "upstream_events",
]
