"""Archival settings (one frozen object; names follow Hudi's HoodieArchivalConfig)."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


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
    #: default). A commit with nothing to archive pays no request (see hook.py).
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
