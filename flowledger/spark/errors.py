"""Errors of the Spark integration: setup problems a user fixes once, each as one clear line."""

from __future__ import annotations

from storage import InvalidInputError

from ..errors import FlowledgerError


class SparkSetupError(FlowledgerError):
    """A Spark session cannot be created as configured."""


class JavaNotFound(SparkSetupError):
    """No Java runtime for Spark's JVM."""


class HadoopVersionMismatch(SparkSetupError):
    """hadoop-aws on the classpath is not the Hadoop version PySpark bundles."""


class JarsUnavailable(SparkSetupError):
    """The s3a jars are not cached and cannot be fetched."""


class SparkWriteError(FlowledgerError, InvalidInputError):
    """A Spark write could not be turned into a commit (bad mode, bad partition columns...)."""


class NotDirect(SparkWriteError):
    """An input file does not hold exactly what Spark reads from it: the writer takes Spark's
    rows instead (never reaches the user: direct_scan.py)."""
