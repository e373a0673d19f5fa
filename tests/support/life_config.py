"""The life test's configurations: the table and row shapes, key scope, merge mode, record
index and compaction mode of one run, and the tiny-table settings every run uses (see
tests/support/keyed_life.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from tests.support.keyed_model import Row
from timeline import TableSettings
from timeline.settings import ArchivalSettings

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("p", pa.string()), ("v", pa.string())])

#: Partition values. Values that partition naming maps to the same path ('x y', 'x_y') are
#: added with FLOWLEDGER_LIFE_TRICKY_PARTITIONS=1 (distinct values must stay distinct).
PARTITIONS = ["a", "b"]
TRICKY_PARTITIONS = ["x y", "x_y"]


def partitions() -> list[str]:
    tricky = os.environ.get("FLOWLEDGER_LIFE_TRICKY_PARTITIONS", "") == "1"
    return PARTITIONS + (TRICKY_PARTITIONS if tricky else [])


def composite_keys() -> bool:
    """FLOWLEDGER_LIFE_COMPOSITE_KEYS=1: the record key is (p, id), a composite key, so a
    record is identified by both columns whatever the key scope."""
    return os.environ.get("FLOWLEDGER_LIFE_COMPOSITE_KEYS", "") == "1"


def rows_strategy(max_size: int = 6) -> st.SearchStrategy[list[Row]]:
    return st.lists(
        st.fixed_dictionaries(
            {
                "id": st.integers(0, 9),
                "ts": st.integers(0, 3),  # few values: ordering ties are common
                "p": st.sampled_from(partitions()),  # a global key may move partition
                "v": st.sampled_from(["x", "y", "z"]),
            }
        ),
        min_size=1,
        max_size=max_size,  # duplicate keys inside a batch are common
    )


@dataclass(frozen=True)
class LifeConfig:
    table_type: str  # copy_on_write | merge_on_read
    key_scope: str  # global | partition
    merge_mode: str  # commit_time | event_time
    record_index: bool
    #: merge-on-read: `inline` compacts inside writes every 2 delta commits (the compaction
    #: then completes right after the delta commit); `off` only where the rules say.
    compaction_mode: str = "off"

    @property
    def name(self) -> str:
        rli = "+rli" if self.record_index else ""
        key = "/composite" if composite_keys() else ""
        mode = self.compaction_mode
        return f"{self.table_type}/{self.key_scope}/{self.merge_mode}/{mode}{rli}{key}"


#: The table type comes from the machine class (`machine`); copy-on-write has no compaction.
CONFIGS = st.builds(
    LifeConfig,
    table_type=st.just("merge_on_read"),
    key_scope=st.sampled_from(["global", "partition"]),
    merge_mode=st.sampled_from(["commit_time", "event_time"]),
    record_index=st.booleans(),
    compaction_mode=st.sampled_from(["off", "inline"]),
)


ARCHIVAL = ArchivalSettings(
    keep_min_commits=2,
    keep_max_commits=4,
    archival_batch_size=2,
    archive_merge_files_batch_size=2,
)


def life_settings(cfg: LifeConfig) -> TableSettings:
    rli: dict[str, Any] = (
        {
            "keyed_index": "record_level",
            "record_index_shard_keys": 3,
            "record_index_row_group_keys": 2,
            "record_index_max_deltas": 3,
        }
        if cfg.record_index
        else {}
    )
    return TableSettings(
        small_file_limit=4000,
        parquet_max_file_size=2500,
        parquet_row_group_rows=3,
        bloom_index_fpp=0.5,
        cleaner_commits_retained=3,
        cleaner_fileversions_retained=2,
        compaction_mode=cfg.compaction_mode,
        compaction_max_delta_commits=2,
        local_entry_cache=False,
        archival=ARCHIVAL,
        **rli,
    )
