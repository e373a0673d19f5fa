"""File groups and file slices (model.py) and the one view that builds them (view.py)."""

from .log_files import LOG_FILES, LogFile, log_objects_of, log_ref, logs_of, ref_path
from .model import FileGroup, FileSlice, slice_index
from .view import (
    COMPACTION_DETAIL,
    FileGroupFold,
    FileGroupView,
    anchor_of,
    is_compaction,
    merges_on_read,
)

__all__ = [
    "COMPACTION_DETAIL",
    "LOG_FILES",
    "FileGroup",
    "FileGroupFold",
    "FileGroupView",
    "FileSlice",
    "LogFile",
    "anchor_of",
    "is_compaction",
    "log_objects_of",
    "log_ref",
    "logs_of",
    "merges_on_read",
    "ref_path",
    "slice_index",
]
