"""Settings of the provenance repository (one frozen object; see docs/configuration.md).

Names follow NiFi's `nifi.provenance.repository.*` properties where one exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from timeline import TableSettings

MiB = 1024 * 1024
GiB = 1024 * MiB

#: NiFi's default searchable fields (`nifi.provenance.repository.indexed.fields`), plus
#: relationship, transit URI and details which the issue asks to be searchable too.
DEFAULT_INDEXED_FIELDS: tuple[str, ...] = (
    "event_type",
    "flowfile_uuid",
    "filename",
    "component_id",
    "relationship",
    "transit_uri",
    "details",
    "alternate_identifier_uri",
    "source_queue_identifier",
)


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "flowledger" / "provenance")


@dataclass(frozen=True)
class ProvenanceSettings:
    #: `nifi.provenance.repository.journal.count`: in-memory journals written concurrently.
    journal_count: int = 16
    #: Events buffered in one journal before it is flushed (one object per flush).
    journal_max_events: int = 50_000
    #: A buffered journal (`sync=False`) is flushed by the maintenance thread after this
    #: many seconds.
    journal_flush_interval_s: float = 1.0
    #: `nifi.provenance.repository.always.sync`: `register_events`/`register_table` return
    #: once their events are durable (unless called with `sync=False`).
    always_sync: bool = True
    #: Group commit: the longest a flushing writer waits for sync writers already on their
    #: way to the same journal, so that one flush carries them all (a lone writer never waits).
    journal_sync_wait_s: float = 0.002
    #: Arrow IPC codec of journal objects: lz4, zstd or none (NiFi does not compress on
    #: write; lz4 costs little and shrinks each PUT about 5x).
    journal_compression: str = "lz4"
    #: Where the store can append (the local backend), a writer appends each flush to its own
    #: log, one `fdatasync` per flush, and starts a new log past this many bytes (a log is
    #: deleted once merged and left). 0: one object per flush everywhere (object stores
    #: always do that).
    journal_log_bytes: int = 64 * MiB
    #: `nifi.provenance.repository.rollover.time` (seconds).
    rollover_time_s: float = 30.0
    #: `nifi.provenance.repository.rollover.size` (bytes of unmerged journals).
    rollover_size: int = 100 * MiB
    #: Unmerged journal bytes above which writers are slowed (they run the rollover themselves).
    max_journal_backlog: int = 1 * GiB
    #: A hole in the id sequence (a writer died between allocating ids and writing its
    #: journal) is skipped by rollover once the journal after it is this old.
    journal_gap_timeout_s: float = 60.0
    #: Parts of an ingest that never committed (the process died) are deleted by recovery
    #: once the newest is this old; an ingest still staging writes a part every few seconds.
    staging_timeout_s: float = 3600.0
    #: Events per Parquet row group, the unit a lookup reads and decodes (NiFi's block index:
    #: 1 MB of uncompressed events, about 4,096 events).
    row_group_events: int = 4096
    #: Rows per row group of the per-file term index.
    index_row_group_terms: int = 4096
    #: `nifi.provenance.repository.compress.on.rollover`: Parquet codec of merged files.
    compression: str = "zstd"
    compression_level: int = 3
    #: `nifi.provenance.repository.max.storage.time` (seconds; NiFi's default 30 days).
    max_storage_time_s: float = 30 * 24 * 3600.0
    #: `nifi.provenance.repository.max.storage.size` (bytes; NiFi's default 10 GB).
    max_storage_size: int = 10 * GiB
    #: `nifi.provenance.repository.max.attribute.length`.
    max_attribute_length: int = 65536
    #: `nifi.provenance.repository.indexed.fields`.
    indexed_fields: tuple[str, ...] = DEFAULT_INDEXED_FIELDS
    #: `nifi.provenance.repository.indexed.attributes`.
    indexed_attributes: tuple[str, ...] = ()
    #: NiFi's lineage limit on FlowFile UUIDs in one lineage query.
    max_lineage_uuids: int = 100
    #: Events in one lineage graph (a lineage larger than this is refused, not truncated).
    max_lineage_events: int = 10_000
    #: Local cache of immutable objects (merged files, journals) for DuckDB.
    cache_dir: str = field(default_factory=_default_cache_dir)
    #: Threads reading files in parallel for a search.
    query_threads: int = 8
    #: The provenance table's timeline settings (cleaner, heartbeats, archival).
    table: TableSettings = field(default_factory=TableSettings)
    #: Seconds a search (query, lineage) may reuse this process's last view of the repository
    #: instead of asking the store (a HEAD and a LIST): it may then miss another process's
    #: events that recent. 0: every search sees every write that returned before it.
    search_snapshot_reuse_s: float = 0.0

    def __post_init__(self) -> None:
        if self.journal_count < 1 or self.journal_max_events < 1:
            raise ValueError("journal_count and journal_max_events must be >= 1")
        if self.journal_sync_wait_s < 0:
            raise ValueError("journal_sync_wait_s must be >= 0")
        if self.row_group_events < 1 or self.index_row_group_terms < 1:
            raise ValueError("row_group_events and index_row_group_terms must be >= 1")
        if self.max_attribute_length < 1:
            raise ValueError("max_attribute_length must be >= 1")
        if self.search_snapshot_reuse_s < 0:
            raise ValueError("search_snapshot_reuse_s must be >= 0")
        unknown = set(self.indexed_fields) - set(DEFAULT_INDEXED_FIELDS) - {"component_type"}
        if unknown:
            raise ValueError(f"indexed_fields: unknown searchable fields {sorted(unknown)}")
