"""The named choices of a keyed table, each a `StrEnum` whose values are the names stored in
table properties and commit metadata (so a member and its name compare equal, and what
older tables hold reads unchanged): the table type, the merge mode, the key scope, and what
an insert does with a key already stored.

Every boundary (properties read from storage, CLI options, Spark options) parses a name
with `parse` (the `Choice` base, timeline/choice.py), which refuses another in one line
naming the values offered.
"""

from __future__ import annotations

from ..choice import Choice


class TableType(Choice):
    """How a keyed table stores changes (Hudi's `hoodie.table.type`)."""

    COPY_ON_WRITE = "copy_on_write"  # a change writes a new base file of its file group
    MERGE_ON_READ = "merge_on_read"  # delta commits to log files, merged on read, compacted

    @classmethod
    def describe(cls) -> str:
        return "table type"


class MergeMode(Choice):
    """Which of two versions of a record wins (Hudi 1.x's `hoodie.record.merge.mode`)."""

    COMMIT_TIME = "commit_time"  # the latest write wins (COMMIT_TIME_ORDERING)
    EVENT_TIME = "event_time"  # the highest ordering value wins, ties by commit order

    @classmethod
    def describe(cls) -> str:
        return "merge mode"


class KeyScope(Choice):
    """Where a record key is unique."""

    GLOBAL = "global"  # in the whole table; a record may move partitions
    PARTITION = "partition"  # within its partition (key + partition = record)

    @classmethod
    def describe(cls) -> str:
        return "key scope"


class OnDuplicate(Choice):
    """What an insert does with a key the table already holds."""

    FAIL = "fail"  # nothing is committed (DuplicateKeys)
    DROP = "drop"  # the incoming record is skipped

    @classmethod
    def describe(cls) -> str:
        return "on_duplicate"


__all__ = ["KeyScope", "MergeMode", "OnDuplicate", "TableType"]
