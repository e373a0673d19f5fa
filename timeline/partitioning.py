"""Partition naming: Hive-style `col=value/...` paths, one implementation for every writer.

A partition's name is built from the canonical JSON form of its values (`file_stats.stat_value`,
so a timestamp names its partition in UTC and bytes in hex). How that text becomes a path
segment is the table's partition naming, fixed when the table is created:

* `hive` (every table this version creates): Hive's and Spark's
  `escapePathName`. The characters they escape (ASCII controls, `"#%'*/:=?\\{[]^` and DEL,
  plus the space and `<>|` they also escape on Windows, and NUL) become `%XX`, their code in
  hex; every other character, non-ASCII ones included, is kept. Column names are escaped
  the same way. A null is `__HIVE_DEFAULT_PARTITION__` (Hive's and Spark's name for it); a
  string that is literally that name is written `%5F_HIVE_DEFAULT_PARTITION__` and the empty
  string is `col=` (Spark writes both as null; here they stay distinct values). Distinct
  values therefore always have distinct names, and `parse_partition` gives the values back.
* `legacy` (tables earlier versions created): every character outside `[A-Za-z0-9-_.:]`
  became `_`, so distinct values could share a name. Such a table keeps that naming for all
  its writes, so its existing partitions keep their names; it never mixes the two.

Timeline's own writer splits rows by these names (`split_partitions`); a writer that only sees
finished files (Spark's JVM writer) names each file's partition from the file's footer
statistics, where a partition column's min equals its max (`partition_from_stats`), so both
paths name the same data the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from .choice import Choice
from .errors import PartitionNamingError
from .file_stats import stat_value

#: The partition value of nulls (Hive's, Spark's).
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


class PartitionNaming(Choice):
    """How partition values become path segments (see the module docstring)."""

    HIVE = "hive"  # percent-escaping as Hive and Spark write partition paths
    LEGACY = "legacy"  # tables earlier versions created (lossy: `x y` and `x/y` are both `x_y`)

    @classmethod
    def describe(cls) -> str:
        return "partition naming"


HIVE_NAMING = PartitionNaming.HIVE
LEGACY_NAMING = PartitionNaming.LEGACY

#: What `escapePathName` escapes (Hive's `FileUtils`, Spark's `ExternalCatalogUtils`), with
#: the set both add on Windows and NUL, so no value ever yields a control character in a key.
ESCAPED = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^") + list(" <>|"))


def check_naming(naming: str) -> PartitionNaming:
    """`naming` as its member; a name this version does not know raises
    `PartitionNamingError` in one line naming the known ones."""
    try:
        return PartitionNaming.parse(naming)
    except ValueError as exc:
        raise PartitionNamingError(f"{exc}; the table was written by a newer flowledger") from None


def escape_path_name(text: str) -> str:
    """`text` with each character of `ESCAPED` written as `%XX` (Hive's `escapePathName`)."""
    return "".join(f"%{ord(c):02X}" if c in ESCAPED else c for c in text)


def unescape_path_name(text: str) -> str:
    """The inverse of `escape_path_name` (`%XX` read as UTF-8; a lone `%` stays)."""
    return unquote(text, errors="strict")


def partition_value(v: Any, naming: str) -> str:
    """The text one value contributes to a partition path under `naming`."""
    if check_naming(naming) == LEGACY_NAMING:
        text = NULL_PARTITION if v is None else str(stat_value(v))
        return "".join(c if c.isalnum() or c in "-_.:" else "_" for c in text) or "_"
    if v is None:
        return NULL_PARTITION
    text = escape_path_name(str(stat_value(v)))
    return "%5F" + text[1:] if text == NULL_PARTITION else text


def partition_column(name: str, naming: str) -> str:
    """A partition column's name as its path segment starts (`<name>=`)."""
    return escape_path_name(name) if check_naming(naming) == HIVE_NAMING else name


def partition_path(values: Sequence[tuple[str, Any]], *, naming: str) -> str:
    """`col=value/...` for the (column, value) pairs, in the order given."""
    return "/".join(
        f"{partition_column(c, naming)}={partition_value(v, naming)}" for c, v in values
    )


def parse_partition(name: str, *, naming: str) -> list[tuple[str, str | None]]:
    """The (column, value text) pairs a partition name holds, None for a null: the values
    as written (`stat_value`'s text) under `hive` naming; the lossy text under `legacy`."""
    if not name:
        return []
    out: list[tuple[str, str | None]] = []
    for segment in name.split("/"):
        col, _, text = segment.partition("=")
        if check_naming(naming) == LEGACY_NAMING:
            out.append((col, None if text == NULL_PARTITION else text))
        else:
            value = None if text == NULL_PARTITION else unescape_path_name(text)
            out.append((unescape_path_name(col), value))
    return out


def split_partitions(
    table: pa.Table, partition_by: Sequence[str], *, naming: str
) -> list[tuple[str, pa.Table]]:
    """Hive-style partitions (`col=value/...`) and their rows; partition columns are kept."""
    if not partition_by:
        return [("", table)]
    missing = [c for c in partition_by if c not in table.column_names]
    if missing:
        raise ValueError(f"partition column(s) {missing} not in the table's columns")
    keys = table.select(list(partition_by)).to_pylist()
    groups: dict[str, list[int]] = {}
    for idx, row in enumerate(keys):
        path = partition_path([(c, row[c]) for c in partition_by], naming=naming)
        groups.setdefault(path, []).append(idx)
    return [(p, table.take(pa.array(ix, pa.int64()))) for p, ix in sorted(groups.items())]


def partition_from_stats(
    partition_by: Sequence[str], stats: Mapping[str, Mapping[str, Any]], rows: int, *, naming: str
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
    return partition_path(values, naming=naming)
