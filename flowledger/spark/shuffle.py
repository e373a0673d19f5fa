"""The width of a keyed write's shuffles, sized to its input.

A keyed write shuffles several times (combining duplicates, grouping by candidate file and
by file group). At Spark's default of 200 shuffle partitions a write of six rows runs
hundreds of near-empty Python tasks per stage, minutes on a small machine; adaptive query
execution coalesces most of them, but not the stages of the DataFrames the write caches
(Spark keeps a cached plan's partitioning). So for the duration of the write the session's
`spark.sql.shuffle.partitions` is capped at the input's partition count (Spark's own split of
the input, about 128 MiB each for files: a shuffle partition then holds about as much as an
input split), and set back afterwards, whatever the write did.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def input_partitions(df: Any) -> int | None:
    """How many partitions Spark reads `df` in (planned, no job runs); None where the
    DataFrame has no RDD (Spark Connect)."""
    try:
        return int(df.rdd.getNumPartitions())
    except Exception:
        return None


def shuffle_width(df: Any, configured: int) -> int:
    """The shuffle partitions a keyed write of `df` uses: the input's partition count, at
    most the session's setting (and at least one)."""
    n = input_partitions(df)
    return configured if n is None else max(1, min(configured, n))


@contextmanager
def sized_shuffle(df: Any) -> Iterator[int]:
    """Run the block with the session's shuffle partitions sized to `df`; yields the width."""
    conf = df.sparkSession.conf
    before = conf.get(SHUFFLE_PARTITIONS)
    width = shuffle_width(df, int(before))
    conf.set(SHUFFLE_PARTITIONS, str(width))
    try:
        yield width
    finally:
        conf.set(SHUFFLE_PARTITIONS, before)
