"""Table settings (one frozen object, archival settings inside it; names follow Hudi's
configs, see docs/configuration.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from .choice import Choice

MiB = 1024 * 1024

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
LAZY = "LAZY"
EAGER = "EAGER"


class KeyedIndex(Choice):
    """Which index a keyed write asks for the file groups of its keys (Hudi's
    `hoodie.index.type`; docs/tables.md, "Index")."""

    AUTO = "auto"  # the record-level index once an `indexing` run built it, else ranges+blooms
    RANGE_BLOOM = "range_bloom"  # key ranges and bloom filters; the record-level index unread
    RECORD_LEVEL = "record_level"  # as `auto` (the record-level index when built and current)

    @classmethod
    def describe(cls) -> str:
        return "keyed_index"


class ParquetCodec(Choice):
    """The compression codec of the Parquet data files a table writes (Hudi's
    `hoodie.parquet.compression.codec`, pyiceberg's `write.parquet.compression-codec`).
    Readers take each column chunk's codec from the file, so a table may hold files of
    several codecs, and a file filled with new rows may keep its old row groups' codec."""

    ZSTD = "zstd"  # the smallest files at this speed (the default)
    SNAPPY = "snappy"  # less CPU to encode and decode, bigger files (Spark's and delta-rs's)
    GZIP = "gzip"
    LZ4 = "lz4"
    UNCOMPRESSED = "uncompressed"

    @classmethod
    def describe(cls) -> str:
        return "parquet_compression_codec"

    @property
    def arrow(self) -> str:
        """The name pyarrow's Parquet writer takes."""
        return "none" if self is ParquetCodec.UNCOMPRESSED else self.value


@dataclass(frozen=True)
class ArchivalSettings:
    #: hoodie.keep.min.commits: completed commits the active timeline keeps after archiving.
    keep_min_commits: int = 20
    #: hoodie.keep.max.commits: archival starts once completed commits exceed this.
    keep_max_commits: int = 30
    #: hoodie.commits.archival.batch: instants per Avro data block of an archive file.
    archival_batch_size: int = 10
    #: hoodie.archive.beyond.savepoint: archive past savepoints, skipping only savepointed
    #: commits (and the savepoints themselves).
    archive_beyond_savepoint: bool = False
    #: hoodie.archive.automatic: archive after every completed instant of the table (Hudi's
    #: default). A commit with nothing to archive pays no request (see archive/hook.py).
    auto_archive: bool = True
    #: hoodie.archive.async: run the automatic archiver on a background thread.
    async_archive: bool = False
    #: hoodie.archive.merge.enable: merge small archive files (S3 cannot append, so every
    #: archival run writes one new file). Never runs on the commit path.
    archive_merge_enable: bool = True
    #: hoodie.archive.merge.files.batch.size: merge once this many consecutive small files exist.
    archive_merge_files_batch_size: int = 10
    #: hoodie.archive.merge.small.file.limit.bytes: files below this size are merge candidates.
    archive_merge_small_file_limit_bytes: int = 20 * MiB
    #: How long a claimed, uncommitted archival/merge run is protected from being discarded
    #: by another archiver (it may still be writing); committed runs are finished by anyone.
    archive_lease_ms: int = 60_000
    #: Completed objects deleted per request (one DeleteObjects each), oldest chunk first:
    #: safe for manifest-aware readers (`load_active`, `Table.refresh`), and archiving costs
    #: one request per chunk instead of per instant. 1 deletes them one at a time, so even a
    #: reader that ignores the manifest never sees a hole.
    archive_completed_delete_batch: int = 1000
    #: Parallel GETs when collecting instant bodies and loading archive files.
    archive_read_parallelism: int = 8

    def __post_init__(self) -> None:
        if self.keep_min_commits < 1:
            raise ValueError("keep_min_commits must be >= 1 (the newest commit always stays)")
        if self.keep_max_commits <= self.keep_min_commits:
            raise ValueError("keep_max_commits must be greater than keep_min_commits")
        if self.archival_batch_size < 1 or self.archive_merge_files_batch_size < 2:
            raise ValueError("archival_batch_size >= 1 and archive_merge_files_batch_size >= 2")
        if self.archive_lease_ms < 0 or self.archive_read_parallelism < 1:
            raise ValueError("archive_lease_ms >= 0 and archive_read_parallelism >= 1")
        if not 1 <= self.archive_completed_delete_batch <= 1000:
            raise ValueError("archive_completed_delete_batch must be within 1..1000")


@dataclass(frozen=True)
class TableSettings:
    #: hoodie.client.heartbeat.interval_in_ms: how often a writer refreshes its heartbeat.
    heartbeat_interval_ms: int = 60_000
    #: hoodie.client.heartbeat.tolerable.misses: missed beats before a write counts as failed.
    heartbeat_tolerable_misses: int = 2
    #: hoodie.cleaner.policy.failed.writes: LAZY (roll back writes whose heartbeat expired;
    #: safe with several writers) or EAGER (roll back every pending write at the start of a
    #: write; single writer only).
    failed_writes_cleaner_policy: str = LAZY
    #: hoodie.cleaner.policy: KEEP_LATEST_COMMITS or KEEP_LATEST_FILE_VERSIONS.
    cleaner_policy: str = KEEP_LATEST_COMMITS
    #: hoodie.cleaner.commits.retained: commits whose snapshots stay readable after a clean.
    cleaner_commits_retained: int = 10
    #: hoodie.cleaner.fileversions.retained: file slices kept per file group.
    cleaner_fileversions_retained: int = 3
    #: hoodie.clustering.plan.strategy.small.file.limit: files below this size get clustered.
    clustering_small_file_limit: int = 300 * MiB
    #: hoodie.clustering.plan.strategy.max.bytes.per.group: input bytes per clustering group.
    clustering_max_bytes_per_group: int = 2048 * MiB
    #: hoodie.clustering.plan.strategy.max.num.groups: groups per clustering plan.
    clustering_max_num_groups: int = 30
    #: hoodie.parquet.small.file.limit: a keyed table's files below this size take new
    #: records (inserts) before new file groups are started; 0 turns it off.
    small_file_limit: int = 100 * MiB
    #: Not in Hudi: a small file takes new records only while its size is at most this many
    #: times the bytes routed into it, so filling it never rewrites much more than the write
    #: adds (1: a file at least doubles each time it is filled; 0: inserts never rewrite a
    #: file the write does not rewrite anyway; inf: Hudi's rule). See timeline/keyed/sizing.py.
    small_file_rewrite_ratio: float = 1.0
    #: hoodie.parquet.max.file.size: new file groups of a keyed write hold about this much.
    parquet_max_file_size: int = 120 * MiB
    #: hoodie.copyonwrite.record.size.estimate: bytes per record assumed for sizing while
    #: the table has no rows to measure.
    copy_on_write_record_size_estimate: int = 1024
    #: hoodie.index.bloom.fpp: false-positive rate of the per-file bloom filter of record
    #: keys; None: by table type (`bloom_fpp`).
    bloom_index_fpp: float | None = None
    #: File groups one writer process reads and rewrites at once (keyed writes and
    #: compaction; Hudi spreads the same work over hoodie.upsert.shuffle.parallelism tasks).
    #: Reads, encoding and PUTs overlap; each holds one file group's bytes and one row group
    #: of it decoded in memory.
    write_parallelism: int = 4
    #: Bytes of file groups (base slice plus the new records at the table's average record
    #: size) those rewrites hold at once: a rewrite holds its file's bytes a few times over,
    #: and files grow with the table up to `parquet_max_file_size`, so this keeps a writer's
    #: peak bounded whatever the file sizes. A group bigger than this is rewritten alone.
    write_inflight_bytes: int = 256 * MiB
    #: Bytes of small files (below the size read in ranges, 16 MiB) that a copy-on-write
    #: write fetched whole to find its records in and keeps for their rewrite, so that
    #: those files are fetched once; a file beyond what is left is fetched again when it is
    #: rewritten. A constant, so what it adds to a writer's peak does not grow with the
    #: table (0: nothing kept). See docs/tables.md, "Memory".
    located_bytes_budget: int = 64 * MiB
    #: Rows per Parquet row group of the base files keyed writes produce, and the rows a
    #: rewrite decodes at a time (Hudi sizes row groups in bytes, hoodie.parquet.block.size):
    #: a writer's memory then follows this, not the size of the files it rewrites. DuckDB
    #: writes groups of 122,880 rows; readers skip by row group statistics either way.
    parquet_row_group_rows: int = 131_072
    #: hoodie.parquet.compression.codec: the codec of the data files the table writes (a
    #: `ParquetCodec` or its name). Over a keyed table's load, upsert and delete, zstd's
    #: files are 1.7x smaller than snappy's or lz4's for 4-10 % more CPU
    #: (docs/benchmarks.md, "Data-file codecs").
    parquet_compression_codec: ParquetCodec = ParquetCodec.ZSTD
    #: hoodie.write.buffer.limit.bytes: Arrow bytes of rows a streamed insert holds across
    #: its partitions' open files before they are encoded (each partition gathers its rows
    #: into full row groups). Past it, the partition holding most is encoded at once, as a
    #: shorter row group, so the stream's memory stays bounded whatever the commit's size.
    write_buffer_limit_bytes: int = 128 * MiB
    #: Log blocks one delta commit of a merge-on-read table encodes, then log objects (one
    #: per partition touched) it PUTs, at once (PUT latency, not memory, bounds it).
    log_write_parallelism: int = 8
    #: When a merge-on-read table compacts after a delta commit: `inline` (schedule and
    #: execute in the writer when the trigger fires, Hudi's hoodie.compact.inline), `async`
    #: (execute on a thread of the writing process), `off` (only `flowledger timeline compact`
    #: or `table.maintenance.compact`).
    compaction_mode: str = "inline"
    #: hoodie.compact.inline.trigger.strategy: NUM_COMMITS, TIME_ELAPSED, NUM_OR_TIME or
    #: NUM_AND_TIME.
    compaction_trigger: str = "NUM_COMMITS"
    #: hoodie.compact.inline.max.delta.commits: delta commits since the latest compaction
    #: that fire the NUM_* triggers.
    compaction_max_delta_commits: int = 5
    #: hoodie.compact.inline.max.delta.seconds: seconds since the latest compaction (or the
    #: first delta commit after it) that fire the TIME_* triggers.
    compaction_max_delta_seconds: int = 3600
    #: hoodie.compaction.strategy: `log_size` (LogFileSizeBasedCompactionStrategy: file
    #: groups with the most log bytes first).
    compaction_strategy: str = "log_size"
    #: hoodie.compaction.logfile.size.threshold: file groups with fewer log bytes are left
    #: out of a plan (0: every group with a log).
    compaction_log_file_size_threshold: int = 0
    #: hoodie.index.type: which index a keyed write asks. `auto` (and `record_level`) use
    #: the record-level index once an `indexing` run built it (RECORD_INDEX), else key ranges
    #: and bloom filters (BLOOM); `range_bloom` never reads the record-level index (it is
    #: still kept current). See docs/tables.md, "Index".
    keyed_index: KeyedIndex = KeyedIndex.AUTO
    #: Keys per record-level index shard (shards are key ranges, sorted by key).
    record_index_shard_keys: int = 1_000_000
    #: Keys per row group of a shard: the block a lookup decodes.
    record_index_row_group_keys: int = 65_536
    #: Delta shards (one per keyed commit) after which a commit merges them into new base
    #: shards (an `indexing` run starting from the index).
    record_index_max_deltas: int = 20
    #: Optimistic-concurrency retries of the completing log write before giving up
    #: (each retry first re-validates against the commits that won in between).
    commit_max_attempts: int = 1000
    #: Distinguishes this writer in timeline objects (ownership checks after lost responses).
    writer_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    #: Keep the newest completed entries this machine completed on local disk (under
    #: $FLOWLEDGER_CACHE/timeline, else ~/.cache/flowledger/timeline), so the next process's
    #: commit does not GET the newest commit again to check its schema (entry_cache.py).
    local_entry_cache: bool = True
    #: Timeline archival (Hudi's HoodieArchivalConfig), including whether it runs after
    #: every commit (`auto_archive`, a post-commit hook chosen when the table is opened).
    archival: ArchivalSettings = field(default_factory=ArchivalSettings)

    def __post_init__(self) -> None:
        if self.failed_writes_cleaner_policy not in (LAZY, EAGER):
            raise ValueError("failed_writes_cleaner_policy must be LAZY or EAGER")
        if self.cleaner_policy not in (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS):
            raise ValueError(
                "cleaner_policy must be KEEP_LATEST_COMMITS or KEEP_LATEST_FILE_VERSIONS"
            )
        if self.heartbeat_interval_ms <= 0 or self.heartbeat_tolerable_misses < 0:
            raise ValueError("heartbeat interval must be > 0 and tolerable misses >= 0")
        if self.small_file_limit < 0 or self.parquet_max_file_size <= 0:
            raise ValueError("small_file_limit must be >= 0 and parquet_max_file_size > 0")
        if not self.small_file_rewrite_ratio >= 0:
            raise ValueError("small_file_rewrite_ratio must be >= 0")
        fpp = self.bloom_index_fpp
        if (fpp is not None and not 0 < fpp < 1) or self.copy_on_write_record_size_estimate <= 0:
            raise ValueError("bloom_index_fpp must be within (0, 1), record size estimate > 0")
        if self.write_parallelism < 1 or self.log_write_parallelism < 1:
            raise ValueError("write_parallelism and log_write_parallelism must be >= 1")
        if self.write_inflight_bytes < 1:
            raise ValueError("write_inflight_bytes must be >= 1")
        if self.located_bytes_budget < 0:
            raise ValueError("located_bytes_budget must be >= 0")
        if self.parquet_row_group_rows < 1:
            raise ValueError("parquet_row_group_rows must be >= 1")
        if self.write_buffer_limit_bytes < 0:
            raise ValueError("write_buffer_limit_bytes must be >= 0")
        if self.compaction_mode not in ("inline", "async", "off"):
            raise ValueError("compaction_mode must be inline, async or off")
        if self.compaction_trigger not in (
            "NUM_COMMITS",
            "TIME_ELAPSED",
            "NUM_OR_TIME",
            "NUM_AND_TIME",
        ):
            raise ValueError(
                "compaction_trigger must be NUM_COMMITS, TIME_ELAPSED, NUM_OR_TIME or NUM_AND_TIME"
            )
        if self.compaction_strategy != "log_size":
            raise ValueError("compaction_strategy must be log_size")
        if self.compaction_max_delta_commits < 1 or self.compaction_max_delta_seconds < 0:
            raise ValueError("compaction_max_delta_commits >= 1, max_delta_seconds >= 0")
        # A name (as a user or a Spark option gives it) is held as its member.
        object.__setattr__(self, "keyed_index", KeyedIndex.parse(self.keyed_index))
        codec = ParquetCodec.parse(self.parquet_compression_codec)
        object.__setattr__(self, "parquet_compression_codec", codec)
        if min(self.record_index_shard_keys, self.record_index_row_group_keys) < 1:
            raise ValueError("record index shard and row group sizes must be >= 1")
        if self.record_index_max_deltas < 1:
            raise ValueError("record_index_max_deltas must be >= 1")
        if self.cleaner_commits_retained < 1 or self.cleaner_fileversions_retained < 1:
            raise ValueError("cleaner retention must keep at least 1")

    def bloom_fpp(self, merge_on_read: bool) -> float:
        """The false-positive rate of the filters a write builds: `bloom_index_fpp`, else
        1e-6 on merge-on-read tables (a write reads the slices of every key with a false
        second candidate, and a global key over overlapping ranges is probed against dozens
        of filters) and 0.01 on copy-on-write ones, where a false candidate costs a read of
        a file the write usually rewrites anyway and a filter three times the size costs
        every rewrite (~20 % of a random upsert at 10M rows). Looser than Hudi's 1e-9 so
        that a 1,000-key file's filter still fits inline in the commit metadata (4 KiB;
        bigger ones go to a checksummed sidecar object; timeline/keyed/bloom.py)."""
        if self.bloom_index_fpp is not None:
            return self.bloom_index_fpp
        return 1e-6 if merge_on_read else 0.01

    @property
    def heartbeat_expiry_s(self) -> float:
        return self.heartbeat_interval_ms * (self.heartbeat_tolerable_misses + 1) / 1000.0
