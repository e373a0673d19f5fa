"""Refusals raised in the Python worker that runs a data source's hooks, reported as one line.

PySpark runs a Python data source's `schema()`, `reader()`, `writer()` and the writer's
`commit()` in a Python worker, not in the driver's own process, and hands an exception raised
there to the user as an `AnalysisException` carrying that worker's traceback. A flowledger
refusal (an error whose message names the fix) needs no traceback: `one_line_refusals` tells
the worker to report the message alone, through the switch PySpark's worker reads when it
reports an error (`SPARK_HIDE_TRACEBACK`, the worker-side face of the session's
`spark.sql.execution.pyspark.udf.hideTraceback.enabled`). The worker exits after reporting
an error, so the switch ends with it; other errors keep their traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from storage import FlowledgerBaseError

#: The environment variable PySpark's worker reads to report an error without its traceback.
HIDE_TRACEBACK = "SPARK_HIDE_TRACEBACK"
#: The package of PySpark's data source workers (imported only in such a worker).
WORKER_PACKAGE = "pyspark.sql.worker."


def in_data_source_worker() -> bool:
    """Whether this process is a PySpark worker running a data source's hook."""
    return any(name.startswith(WORKER_PACKAGE) for name in sys.modules)


@contextmanager
def one_line_refusals() -> Iterator[None]:
    """Run a data source hook; a flowledger error it raises is reported by the worker as its
    message alone."""
    try:
        yield
    except FlowledgerBaseError:
        if in_data_source_worker():
            os.environ[HIDE_TRACEBACK] = "1"
        raise


__all__ = ["HIDE_TRACEBACK", "in_data_source_worker", "one_line_refusals"]
