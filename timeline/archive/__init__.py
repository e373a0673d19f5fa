"""Archival of the timeline (Hudi's HoodieTimelineArchiver and archived timeline).

See docs/archival.md for the rules, the archive file format and the crash-safety protocol.
"""

from ..loader import ActiveView
from ..settings import ArchivalSettings
from .archiver import Archiver, ArchiveResult
from .errors import (
    ArchiveConflict,
    ArchiveError,
    ArchiveUnknownOutcome,
    CorruptArchive,
    MissingArchiveManifest,
)
from .format import SCHEMA, ArchivedInstant, decode_archive, encode_archive
from .hook import AutoArchive, auto_archive_of, may_archive, post_commit_hooks
from .manifest import ArchiveFile, Manifest, read_manifest
from .planner import ArchivePlan, plan_archival
from .reader import ArchivedTimeline, combined_timeline
from .view import (
    ArchiveSnapshot,
    archived_log,
    load_active,
    manifest_of,
    table_state,
)

__all__ = [
    "SCHEMA",
    "ActiveView",
    "ArchivalSettings",
    "ArchiveConflict",
    "ArchiveError",
    "ArchiveFile",
    "ArchivePlan",
    "ArchiveResult",
    "ArchiveSnapshot",
    "ArchiveUnknownOutcome",
    "ArchivedInstant",
    "ArchivedTimeline",
    "Archiver",
    "AutoArchive",
    "CorruptArchive",
    "Manifest",
    "MissingArchiveManifest",
    "archived_log",
    "auto_archive_of",
    "combined_timeline",
    "decode_archive",
    "encode_archive",
    "load_active",
    "manifest_of",
    "may_archive",
    "plan_archival",
    "post_commit_hooks",
    "read_manifest",
    "table_state",
]
