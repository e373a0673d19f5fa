"""Keyed tables on the timeline (Hudi's data model, copy-on-write): properties fixed at
creation, insert/upsert/delete that rewrite only the file groups holding changed keys, an
index from per-file key ranges and bloom filters or a record-level index (`indexing`),
row meta columns, incremental and CDC reads.

See docs/tables.md.
"""

from .bloom import BloomFilter
from .index import KeyIndex, RangeBloomIndex
from .indexing import build_index
from .keys import COMMIT_TIME_COL, META_COLUMNS, RECORD_KEY_COL
from .properties import (
    COMMIT_TIME,
    COPY_ON_WRITE,
    EVENT_TIME,
    GLOBAL,
    KEY_SCOPES,
    MERGE_MODES,
    MERGE_ON_READ,
    PARTITION,
    TABLE_TYPES,
    KeyedProperties,
    PropertiesError,
    load_properties,
)
from .record_index import RecordLevelIndex, choose_index, index_view

__all__ = [
    "COMMIT_TIME",
    "COMMIT_TIME_COL",
    "COPY_ON_WRITE",
    "EVENT_TIME",
    "GLOBAL",
    "KEY_SCOPES",
    "MERGE_MODES",
    "MERGE_ON_READ",
    "META_COLUMNS",
    "PARTITION",
    "RECORD_KEY_COL",
    "TABLE_TYPES",
    "BloomFilter",
    "KeyIndex",
    "KeyedProperties",
    "PropertiesError",
    "RangeBloomIndex",
    "RecordLevelIndex",
    "build_index",
    "choose_index",
    "index_view",
    "load_properties",
]
