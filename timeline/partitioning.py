"""Partition naming: Hive-style `col=value/...` paths, one implementation for every writer.

A partition's name is built from the canonical JSON form of its values (`file_stats.stat_value`,
so a timestamp names its partition in UTC and bytes in hex), with every character outside
`[A-Za-z0-9-_.:]` replaced by `_`; a null value is `__HIVE_DEFAULT_PARTITION__` (Hive's and
Spark's name for it). Timeline's own writer splits rows by these names (`split_partitions`); a
writer that only sees finished files (Spark's JVM writer) names each file's partition from the
file's footer statistics, where a partition column's min equals its max
(`partition_from_stats`), so both paths name the same data the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from .file_stats import stat_value

#: The partition value of nulls (Hive's, Spark's).
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def partition_value(v: Any) -> str:
    """The text one value contributes to a partition path."""
    text = NULL_PARTITION if v is None else str(stat_value(v))
    return "".join(c if c.isalnum() or c in "-_.:" else "_" for c in text) or "_"


def partition_path(values: Sequence[tuple[str, Any]]) -> str:
    """`col=value/...` for the (column, value) pairs, in the order given."""
    return "/".join(f"{c}={partition_value(v)}" for c, v in values)


def split_partitions(table: pa.Table, partition_by: Sequence[str]) -> list[tuple[str, pa.Table]]:
    """Hive-style partitions (`col=value/...`) and their rows; partition columns are kept."""
    if not partition_by:
        return [("", table)]
    missing = [c for c in partition_by if c not in table.column_names]
    if missing:
        raise ValueError(f"partition column(s) {missing} not in the table's columns")
    keys = table.select(list(partition_by)).to_pylist()
    groups: dict[str, list[int]] = {}
    for idx, row in enumerate(keys):
        path = partition_path([(c, row[c]) for c in partition_by])
        groups.setdefault(path, []).append(idx)
    return [(p, table.take(pa.array(ix, pa.int64()))) for p, ix in sorted(groups.items())]


def partition_from_stats(
    partition_by: Sequence[str], stats: Mapping[str, Mapping[str, Any]], rows: int
) -> str | None:
    """The partition of a file whose rows share one value per partition column, from its
    column statistics; None when the statistics cannot tell (a column without min/max that
    is not all null, or a min that differs from the max)."""
    values: list[tuple[str, Any]] = []
    for c in partition_by:
        s = stats.get(c)
        if s is None:
            return None
        if rows and s.get("nulls") == rows:
            values.append((c, None))
        elif "min" in s and s.get("min") == s.get("max") and not s.get("nulls"):
            values.append((c, s["min"]))
        else:
            return None
    return partition_path(values)
