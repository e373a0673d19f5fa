"""Archival of the timeline (Hudi's HoodieTimelineArchiver and archived timeline).

See docs/archival.md for the rules, the archive file format and the crash-safety protocol.
"""

from .archiver import Archiver, ArchiveResult
from .errors import ArchiveConflict, ArchiveError, ArchiveOutcomeUnknown, CorruptArchive
from .format import SCHEMA, ArchivedInstant, decode_archive, encode_archive
from .hook import after_commit, archival_settings, configure, may_archive, set_default
from .manifest import ArchiveFile, Manifest, read_manifest
from .planner import ArchivePlan, plan_archival
from .reader import ArchivedTimeline, combined_timeline
from .settings import ArchivalSettings
from .view import ActiveView, load_active, table_state

__all__ = [
    "SCHEMA",
    "ActiveView",
    "ArchivalSettings",
    "ArchiveConflict",
    "ArchiveError",
    "ArchiveFile",
    "ArchiveOutcomeUnknown",
    "ArchivePlan",
    "ArchiveResult",
    "ArchivedInstant",
    "ArchivedTimeline",
    "Archiver",
    "CorruptArchive",
    "Manifest",
    "after_commit",
    "archival_settings",
    "combined_timeline",
    "configure",
    "decode_archive",
    "encode_archive",
    "load_active",
    "may_archive",
    "plan_archival",
    "read_manifest",
    "set_default",
    "table_state",
]
