"""Keyed tables on the timeline (Hudi's data model, copy-on-write): properties fixed at
creation, insert/upsert/delete that rewrite only the file groups holding changed keys, an
index from per-file key ranges and bloom filters or a record-level index (`indexing`),
row meta columns, incremental and CDC reads, the current rows of some keys read through the
index (`lookup_keys`).

See docs/tables.md.
"""

from .changes.engine import (
    ChangesPlan,
    CommitUnit,
    plan_changes,
    read_changed_file,
    read_commit_changes,
)
from .compaction.service import CompactionRun
from .compaction.service import complete as complete_compaction
from .compaction.service import runnable as runnable_compactions
from .compaction.service import start as start_compaction
from .compaction.task import CompactionWork, compact_file_group
from .index.bloom import BloomFilter
from .index.indexing import build_index
from .index.ranges import KeyIndex, RangeBloomIndex
from .index.record_index import RecordLevelIndex, choose_index, index_view
from .keys import COMMIT_TIME_COL, META_COLUMNS, RECORD_KEY_COL, integer_key_column
from .policies import KeyScope, MergeMode, OnDuplicate, TableType
from .properties import (
    KeyedProperties,
    PropertiesError,
    load_properties,
)
from .read.lookup import lookup_keys
from .write import WriteOperation
from .write.engine import (
    EnginePlan,
    EngineShard,
    checks_keys_across_shards,
    commit_shards,
    digests_overlap,
    key_digest,
    plan_engine_write,
    run_shard,
    shard_columns,
)

__all__ = [
    "COMMIT_TIME_COL",
    "META_COLUMNS",
    "RECORD_KEY_COL",
    "BloomFilter",
    "ChangesPlan",
    "CommitUnit",
    "CompactionRun",
    "CompactionWork",
    "EnginePlan",
    "EngineShard",
    "KeyIndex",
    "KeyScope",
    "KeyedProperties",
    "MergeMode",
    "OnDuplicate",
    "PropertiesError",
    "RangeBloomIndex",
    "RecordLevelIndex",
    "TableType",
    "WriteOperation",
    "build_index",
    "checks_keys_across_shards",
    "choose_index",
    "commit_shards",
    "compact_file_group",
    "complete_compaction",
    "digests_overlap",
    "index_view",
    "integer_key_column",
    "key_digest",
    "load_properties",
    "lookup_keys",
    "plan_changes",
    "plan_engine_write",
    "read_changed_file",
    "read_commit_changes",
    "run_shard",
    "runnable_compactions",
    "shard_columns",
    "start_compaction",
]
