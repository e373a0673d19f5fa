"""Clustering: small files of a partition are rewritten into one file (replacecommit with a
plan in its requested object, like Hudi's clustering plan)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .instant import REPLACE_COMMIT, Instant
from .metadata import DataFile
from .parquet_io import read_files
from .writes import put_table

if TYPE_CHECKING:
    from .table import Table


def plan_clustering(table: Table, partition: str | None) -> list[list[DataFile]]:
    s = table.settings
    st = table.state()
    # Merge-on-read: a file group whose slice has log files is compaction's to rewrite (its
    # base alone is not its records); clustering takes the groups without logs.
    with_logs = (
        {sl.base.path for sl in st.latest_slices().values() if sl.logs}
        if st.is_merge_on_read()
        else set()
    )
    small = [
        f
        for f in st.snapshot().files
        if f.size < s.clustering_small_file_limit
        and (partition is None or f.partition == partition)
        and f.path not in with_logs
    ]
    groups: list[list[DataFile]] = []
    by_partition: dict[str, list[DataFile]] = {}
    for f in sorted(small, key=lambda f: (f.partition, f.path)):
        by_partition.setdefault(f.partition, []).append(f)
    for files in by_partition.values():
        current: list[DataFile] = []
        size = 0
        for f in files:
            if current and size + f.size > s.clustering_max_bytes_per_group:
                groups.append(current)
                current, size = [], 0
            current.append(f)
            size += f.size
        groups.append(current)
    return [g for g in groups if len(g) > 1][: s.clustering_max_num_groups]


def cluster(table: Table, partition: str | None = None) -> Instant | None:
    """Plan and execute one clustering; None when there is nothing worth clustering."""
    groups = plan_clustering(table, partition)
    if not groups:
        return None
    plan = {"operation": "cluster", "groups": [[f.path for f in g] for g in groups]}
    txn = table.begin(REPLACE_COMMIT, operation="cluster", plan=plan)
    try:
        for group in groups:
            data = read_files(table.store, group)
            if data is not None:
                put_table(txn, group[0].partition, data)
        txn.replace(f for g in groups for f in g)
        return txn.commit({"clustered_files": str(sum(len(g) for g in groups))})
    except BaseException:
        txn.abort()
        raise
