"""Settings of the content repository (one frozen object; see docs/configuration.md)."""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
HOUR = 3600.0


@dataclass(frozen=True)
class ContentRepositorySettings:
    """Named after NiFi's `nifi.content.*` properties where one exists."""

    #: `nifi.content.repository.directory.<name>`: (name, repository URI) per container.
    #: Empty: one container named "default" under the repository's own prefix.
    containers: tuple[tuple[str, str], ...] = ()
    #: NiFi's SECTIONS_PER_CONTAINER: sub-prefixes per container that spread the keys.
    sections: int = 1024
    #: `nifi.content.claim.max.appendable.size`: a packed resource claim is sealed at this size.
    max_appendable_size: int = 1 * MiB
    #: Contents that grow past this size stream (multipart) into a resource claim of their own.
    large_content_threshold: int = 1 * MiB
    #: Reads up to this size are fetched and verified before any byte is returned; larger
    #: contents are verified as they stream and fail at the end if the checksum differs.
    verify_in_memory_max: int = 8 * MiB
    #: Larger contents are read as ranged GETs of this size, `read_ahead_parts` in flight.
    read_part_size: int = 8 * MiB
    read_ahead_parts: int = 4
    #: Per-container quota in bytes: object stores have no capacity. None = unlimited.
    max_bytes: int | None = None
    #: `nifi.content.repository.archive.enabled`: keep unreferenced claims for replay.
    archive_enabled: bool = True
    #: `nifi.content.repository.archive.max.retention.period` (seconds; 3 hours).
    archive_max_retention: float = 3 * HOUR
    #: `nifi.content.repository.archive.max.usage.percentage`: archived claims are destroyed,
    #: oldest first, while a container's usage is above this share of `max_bytes`.
    archive_max_usage_percentage: float = 90.0
    #: `nifi.content.repository.archive.backpressure.percentage`: writers wait above this
    #: share of `max_bytes`. None = `archive_max_usage_percentage` + 2.
    archive_backpressure_percentage: float | None = None
    #: `nifi.content.repository.archive.cleanup.frequency` (seconds) of the background
    #: cleanup thread; 0 disables the thread (call `run_archive_cleanup` yourself).
    archive_cleanup_frequency: float = 60.0
    #: A resource claim object that no durable ledger entry registers is an orphan (its writer
    #: crashed before committing) once it is older than this (seconds). Must exceed the
    #: longest session.
    orphan_grace_period: float = 600.0
    #: Run `cleanup` (orphan sweep and pending deletions) when the repository opens.
    cleanup_on_start: bool = True
    #: Compact the claim ledger into its checkpoint once this many batches are outstanding.
    ledger_checkpoint_batches: int = 256
    #: Give up (ContainerFull) after waiting this long under backpressure; None = wait forever.
    backpressure_max_wait: float | None = None

    def __post_init__(self) -> None:
        if self.sections < 1:
            raise ValueError("sections must be >= 1")
        if self.max_appendable_size < 1 or self.large_content_threshold < 1:
            raise ValueError("max_appendable_size and large_content_threshold must be >= 1")
        if self.read_part_size < 1 or self.read_ahead_parts < 1:
            raise ValueError("read_part_size and read_ahead_parts must be >= 1")
        if self.max_bytes is not None and self.max_bytes < 1:
            raise ValueError("max_bytes must be >= 1 (or None for unlimited)")
        if not 0 < self.archive_max_usage_percentage <= 100:
            raise ValueError("archive_max_usage_percentage must be in (0, 100]")
        names = [n for n, _ in self.containers]
        if len(set(names)) != len(names):
            raise ValueError(f"container names must be unique: {names}")

    @property
    def backpressure_percentage(self) -> float:
        if self.archive_backpressure_percentage is not None:
            return self.archive_backpressure_percentage
        return self.archive_max_usage_percentage + 2.0
