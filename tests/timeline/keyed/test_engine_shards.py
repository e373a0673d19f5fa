"""How an engine splits a keyed write into shards (keyed/write/shards.py): which operations
spread by partition, and the key digests that catch one key in two shards."""

from __future__ import annotations

import pyarrow as pa
import pytest

from timeline import checks_keys_across_shards, digests_overlap, key_digest, shard_columns
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit

GLOBAL = KeyedProperties.of("id", partition_by="p")
PER_PARTITION = KeyedProperties.of("id", partition_by="p", key_scope="partition")
UNPARTITIONED = KeyedProperties.of("id")


def test_only_an_insert_spreads_table_wide_keys_and_then_checks_them() -> None:
    assert shard_columns(GLOBAL, "insert") == ("p",)
    assert shard_columns(GLOBAL, "upsert") == () == shard_columns(GLOBAL, "delete")
    assert shard_columns(PER_PARTITION, "upsert") == ("p",)
    assert shard_columns(UNPARTITIONED, "insert") == ()
    assert checks_keys_across_shards(GLOBAL, "insert")
    assert not checks_keys_across_shards(GLOBAL, "upsert")
    assert not checks_keys_across_shards(PER_PARTITION, "insert")  # a key per partition
    assert not checks_keys_across_shards(UNPARTITIONED, "insert")  # one shard


@pytest.mark.parametrize(
    ("props", "keys"),
    [
        (GLOBAL, pa.array([5, 1, 9, 1], pa.int64())),  # integer keys: the values themselves
        (KeyedProperties.of("id", partition_by="p"), pa.array(["b", "a", "c", "a"])),
        (KeyedProperties.of("id,p", partition_by="p"), pa.array([5, 1, 9, 1], pa.int64())),
    ],
)
def test_digests_overlap_exactly_when_a_key_is_in_two_shards(
    props: KeyedProperties, keys: pa.Array
) -> None:
    data = pa.table({"id": keys, "p": pa.array([0, 0, 1, 0], pa.int64())})

    def shard(rows: list[int]) -> bytes:
        return key_digest(data.take(rows), props)

    a, b, c = shard([0, 1, 3]), shard([2]), shard([1])
    assert len(a) == 16  # distinct: the repeated key once
    assert not digests_overlap([a, b])
    assert digests_overlap([a, b, c])
    assert not digests_overlap([a]) and not digests_overlap([b, b"", b""])
