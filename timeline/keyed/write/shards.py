"""How an engine (Spark) splits a keyed write into shards no two tasks share.

A shard must hold every record that can touch one file group: a file group lives in one
partition, so a partition never spans two shards; and records of one key must meet (to be
combined by the merge mode, or matched with the stored record), so a key never spans two
shards either.

- Keys unique per partition: a shard is whole partitions (a key lives in one).
- Keys unique in the table, upsert or delete: the whole batch is one shard. A global key's
  record may move to another partition; its old and new file groups would then be written by
  two tasks that each see only one side.
- Keys unique in the table, insert into a partitioned table: whole partitions too. An insert
  moves nothing: each task looks its own keys up in the whole table (a stored key is refused
  or dropped as in one process) and places new records only in its partitions' files. The
  one thing two tasks cannot see is the same key arriving in two partitions of one batch, so
  each task also returns a digest of its keys (`key_digest`) and the driver checks them
  against each other before the commit (`digests_overlap`); on an overlap it writes the batch
  again as one shard, whose duplicates are combined as in one process.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..index import key_hashes
from ..keys import record_keys
from ..policies import KeyScope
from ..properties import KeyedProperties
from .request import WriteOperation


def shard_columns(props: KeyedProperties, operation: str = "upsert") -> tuple[str, ...]:
    """The columns whose values split a batch into shards no two tasks share (none: one
    shard)."""
    if props.key_scope != KeyScope.GLOBAL or operation == WriteOperation.INSERT:
        return tuple(props.partition_by)
    return ()


def checks_keys_across_shards(props: KeyedProperties, operation: str) -> bool:
    """Whether the shards' keys must be checked against each other before the commit (a
    table-wide key split by partition: one key may arrive in two partitions)."""
    return props.key_scope == KeyScope.GLOBAL and bool(shard_columns(props, operation))


def key_digest(data: pa.Table, props: KeyedProperties) -> bytes:
    """The sorted, distinct 64-bit digests of `data`'s record keys: a single integer key's
    values themselves (exact), else a 64-bit hash of each key's text (a collision reads as
    an overlap, which costs a rerun, never a wrong answer)."""
    col = props.record_key[0] if len(props.record_key) == 1 else None
    column = data.column(col) if col is not None and col in data.column_names else None
    if column is not None and pa.types.is_integer(column.type) and not column.null_count:
        words = column.to_numpy().astype(np.int64, copy=False).view(np.uint64)
    else:
        words, _ = key_hashes(pa.array(record_keys(data, props), pa.string()))
    return np.unique(words).astype("<u8").tobytes()


def digests_overlap(digests: Sequence[bytes]) -> bool:
    """Whether any digest appears in two of `digests` (each already distinct)."""
    parts = [np.frombuffer(d, dtype="<u8") for d in digests if d]
    if len(parts) < 2:
        return False
    ordered = np.sort(np.concatenate(parts))
    return bool(np.any(ordered[1:] == ordered[:-1]))


__all__ = ["checks_keys_across_shards", "digests_overlap", "key_digest", "shard_columns"]
