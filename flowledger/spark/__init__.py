"""PySpark integration: tables written through the timeline and the provenance Spark jobs leave.

See docs/spark.md. Importing this package does not import pyspark; the functions that need it do.
"""

from .commit_info import CommitInfo, OutputFile, SparkJobInfo, add_commit_hook, commit_hooks

__all__ = ["CommitInfo", "OutputFile", "SparkJobInfo", "add_commit_hook", "commit_hooks"]
