"""Which completions conflict (the optimistic validation run before taking a log position).

The later of two completions checks its intent against every log entry that completed after
the state it was planned on. Write/write follows Hudi's
SimpleConcurrentFileWritesConflictResolutionStrategy: overlapping file groups conflict; a
replaced partition conflicts with any write into it. Table services conflict where one could
make the other's plan wrong (see docs/timeline-protocol.md, "Conflict rules").
"""

from __future__ import annotations

from .errors import SchemaMismatch
from .instant import CLEAN, COMPACTION, RESTORE, ROLLBACK, SAVEPOINT
from .metadata import Entry
from .schema import SCHEMA_KEY, entry_schema, merge_schemas


def _rolls_back_completed(e: Entry) -> bool:
    return (e.action == ROLLBACK and e.metadata.get("target_state") == "completed") or (
        e.action == RESTORE
    )


def _schemas(mine: Entry, theirs: Entry) -> str | None:
    """A concurrent schema change conflicts unless this write's schema already includes it
    (the latest commit must state the whole schema)."""
    if mine.metadata.get(SCHEMA_KEY) is None or theirs.metadata.get(SCHEMA_KEY) is None:
        return None
    if mine.metadata[SCHEMA_KEY] == theirs.metadata[SCHEMA_KEY]:
        return None
    ours, other = entry_schema(mine.metadata), entry_schema(theirs.metadata)
    assert ours is not None and other is not None
    try:
        if merge_schemas(other, ours).equals(ours):
            return None
    except SchemaMismatch as exc:
        return f"the table's schema changed concurrently ({exc})"
    return "the table's schema changed concurrently"


def _write_write(mine: Entry, theirs: Entry) -> str | None:
    changed = _schemas(mine, theirs)
    if changed:
        return changed
    groups = mine.file_groups & theirs.file_groups
    if not (_is_compaction(mine) or _is_compaction(theirs)):
        # Log files of merge-on-read delta commits count as writes to their file group, except
        # against a compaction: logs completing after its plan belong to the slice it writes.
        groups |= (mine.file_groups | _log_groups(mine)) & _log_groups(theirs)
        groups |= _log_groups(mine) & theirs.file_groups
    if groups:
        return f"both wrote file group {sorted(groups)[0]!r}"
    mine_parts = mine.partitions_written | mine.replaced_partitions
    theirs_parts = theirs.partitions_written | theirs.replaced_partitions
    hit = (mine.replaced_partitions & theirs_parts) | (theirs.replaced_partitions & mine_parts)
    if hit:
        return f"partition {sorted(hit)[0]!r} was overwritten concurrently"
    return None


def _is_compaction(e: Entry) -> bool:
    """A compaction completes as a `commit` whose metadata carries its plan's anchor."""
    return e.action == COMPACTION or "compaction" in e.metadata


def _log_groups(e: Entry) -> frozenset[str]:
    return frozenset(str(d["file_group"]) for d in e.metadata.get("log_files", ()))


def conflict(mine: Entry, theirs: Entry) -> str | None:
    """Why `mine` may not complete after `theirs` (None = no conflict)."""
    if theirs.time == mine.time and theirs.action == mine.action:
        return f"{mine.action} {mine.time} already completed"
    if theirs.action == ROLLBACK and theirs.metadata.get("target_state") == "pending":
        if theirs.target == mine.time:
            return f"instant {mine.time} was rolled back by {theirs.time}"
        return None
    if mine.action == ROLLBACK and mine.metadata.get("target_state") == "pending":
        if theirs.time == mine.target and theirs.is_write:
            return f"instant {mine.target} completed before it could be rolled back"
        return None
    if _rolls_back_completed(mine) or _rolls_back_completed(theirs):
        # Restores and rollbacks of completed commits are planned on an exact table state.
        if mine.action == SAVEPOINT and theirs.action == SAVEPOINT:
            return None
        return f"{theirs.action} {theirs.time} changed the table's history"
    if mine.is_write and theirs.is_write:
        return _write_write(mine, theirs)
    if mine.action == CLEAN and theirs.action == SAVEPOINT:
        hit = set(mine.deleted) & set(theirs.metadata.get("files", ()))
        return f"savepoint {theirs.time} protects {sorted(hit)[0]}" if hit else None
    if mine.action == SAVEPOINT and theirs.action == CLEAN:
        hit = set(theirs.deleted) & set(mine.metadata.get("files", ()))
        return f"clean {theirs.time} deleted {sorted(hit)[0]}" if hit else None
    return None
