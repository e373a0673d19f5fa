"""Table settings (one frozen object; names follow Hudi's configs, see docs/configuration.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

MiB = 1024 * 1024

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
LAZY = "LAZY"
EAGER = "EAGER"


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
    #: Optimistic-concurrency retries of the completing log write before giving up
    #: (each retry first re-validates against the commits that won in between).
    commit_max_attempts: int = 1000
    #: Distinguishes this writer in timeline objects (ownership checks after lost responses).
    writer_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        if self.failed_writes_cleaner_policy not in (LAZY, EAGER):
            raise ValueError("failed_writes_cleaner_policy must be LAZY or EAGER")
        if self.cleaner_policy not in (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS):
            raise ValueError(
                "cleaner_policy must be KEEP_LATEST_COMMITS or KEEP_LATEST_FILE_VERSIONS"
            )
        if self.heartbeat_interval_ms <= 0 or self.heartbeat_tolerable_misses < 0:
            raise ValueError("heartbeat interval must be > 0 and tolerable misses >= 0")
        if self.cleaner_commits_retained < 1 or self.cleaner_fileversions_retained < 1:
            raise ValueError("cleaner retention must keep at least 1")

    @property
    def heartbeat_expiry_s(self) -> float:
        return self.heartbeat_interval_ms * (self.heartbeat_tolerable_misses + 1) / 1000.0
