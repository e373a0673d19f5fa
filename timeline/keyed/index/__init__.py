"""Finding the file groups that may hold a key (Hudi's index): key ranges and bloom filters
of base files and logs, and the record-level index. Exports what the writers, compaction and
change reads use."""

from .bloom import BloomBuilder, BloomFilter, key_hashes
from .indexing import merge_if_due
from .merge_on_read import SliceIndex, log_key_stats
from .ranges import (
    IndexFactory,
    KeyIndex,
    RangeBloomIndex,
    bloom_ref,
    filter_ref,
    range_bloom_index,
)
from .record_index import (
    RECORD_INDEX_DELTA,
    IndexView,
    RecordLevelIndex,
    choose_index,
    index_view,
    write_delta,
)

__all__ = [
    "RECORD_INDEX_DELTA",
    "BloomBuilder",
    "BloomFilter",
    "IndexFactory",
    "IndexView",
    "KeyIndex",
    "RangeBloomIndex",
    "RecordLevelIndex",
    "SliceIndex",
    "bloom_ref",
    "choose_index",
    "filter_ref",
    "index_view",
    "key_hashes",
    "log_key_stats",
    "merge_if_due",
    "range_bloom_index",
    "write_delta",
]
