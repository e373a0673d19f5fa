"""A small keyed write runs on the driver, not as a Spark job.

A Spark job has a fixed cost (scheduling, a Python worker, the rows turned into Arrow inside
the task) that dominates a small write. When Spark's plan statistics say the input is at
most `spark.flowledger.keyed.driverWriteThreshold` bytes (default 10 MiB, as Spark's
`spark.sql.autoBroadcastJoinThreshold` decides what to collect for a broadcast; -1 turns it
off), the driver collects it as Arrow (`DataFrame.toArrow`) and runs the same shard step
itself. The estimate is the optimizer's `sizeInBytes` (a cached DataFrame's measured size,
a file scan's file sizes), read from `explain(mode="cost")`, which runs no job; where there
is none to read the write runs as a job.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa

from .conf import CONF_PREFIX
from .errors import SparkWriteError

THRESHOLD_CONF = CONF_PREFIX + "keyed.driverWriteThreshold"
DEFAULT_THRESHOLD = 10 * 1024 * 1024
#: The largest plain Parquet scan an insert streams through the driver (direct_scan.py): one
#: process reads and encodes about 100 MiB of Parquet a second, so past this a cluster's
#: tasks are the faster writer.
STREAM_THRESHOLD_CONF = CONF_PREFIX + "keyed.driverStreamThreshold"
DEFAULT_STREAM_THRESHOLD = 1024 * 1024 * 1024
#: What names the objects a shard written on the driver leaves (tasks use their attempt).
DRIVER_TASK = "driver"

_SIZE = re.compile(r"sizeInBytes=([0-9.]+) ?([KMGTPE]i)?B")
_UNITS = MappingProxyType({"": 0, "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60})


def driver_threshold(
    spark: Any, conf: str = THRESHOLD_CONF, default: int = DEFAULT_THRESHOLD
) -> int:
    """The session's threshold `conf` in bytes (negative: never on the driver)."""
    raw = spark.conf.get(conf, str(default))
    try:
        return int(raw)
    except ValueError:
        raise SparkWriteError(f"{conf} must be a whole number of bytes, not {raw!r}") from None


def within(df: Any, conf: str, default: int) -> bool:
    """Whether the optimizer's size estimate of `df` is within the session's threshold
    `conf` (False when the plan states no size or the threshold is negative)."""
    limit = driver_threshold(df.sparkSession, conf, default)
    if limit < 0:
        return False
    size = estimated_bytes(df)
    return size is not None and size <= limit


def estimated_bytes(df: Any) -> int | None:
    """The optimizer's size estimate of `df`'s whole plan (no job runs); None when the plan
    states none."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            df.explain(mode="cost")
    except Exception:
        return None
    found = _SIZE.search(out.getvalue())
    if found is None:
        return None
    return int(float(found.group(1)) * (1 << _UNITS[found.group(2) or ""]))


def driver_input(
    df: Any, seq: str, direct: Callable[[], pa.Table | None] | None = None
) -> pa.Table | None:
    """`df` collected as Arrow, with its rows' positions in column `seq`, when its estimated
    size is within the session's threshold; None: write it as a job. `direct`: reads the
    rows without Spark (its input files, direct_scan.py), None when it cannot."""
    if not within(df, THRESHOLD_CONF, DEFAULT_THRESHOLD):
        return None
    got = direct() if direct is not None else None
    data: pa.Table = df.toArrow() if got is None else got
    return data.append_column(seq, pa.array(np.arange(data.num_rows, dtype=np.int64)))


__all__ = [
    "DEFAULT_STREAM_THRESHOLD",
    "DRIVER_TASK",
    "STREAM_THRESHOLD_CONF",
    "THRESHOLD_CONF",
    "driver_input",
    "estimated_bytes",
    "within",
]
