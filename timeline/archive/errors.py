"""Errors of archival. A storage conflict or unknown outcome on the archive manifest is raised
as `ArchiveConflict` / `ArchiveUnknownOutcome` (manifest.swap)."""

from __future__ import annotations

from storage import ConflictError, IntegrityError, UnknownOutcomeError

from ..errors import TimelineError


class ArchiveError(TimelineError):
    """Base class of every archival error (a TimelineError, so the CLI reports it)."""


class ArchiveConflict(ArchiveError, ConflictError):
    """Another archiver (or merge) holds the archive manifest: this run did nothing."""


class ArchiveUnknownOutcome(ArchiveError, UnknownOutcomeError):
    """A manifest update may or may not have landed and reading back could not tell."""


class CorruptArchive(ArchiveError, IntegrityError):
    """An archive file (or the manifest, a plan, a checkpoint) fails its checksum or cannot
    be decoded. Also a `storage.IntegrityError`.

    The message names the object: a corrupted archive is reported, never skipped."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message, key)
        self.key = key


class MissingArchiveManifest(CorruptArchive):
    """The archive manifest is gone although archival ran (its archive files or checkpoints
    exist): archived instants cannot be told from active ones, so nothing is read as if the
    table had never been archived. Names the manifest and one object archival wrote."""
