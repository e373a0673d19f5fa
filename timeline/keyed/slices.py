"""File slices of a merge-on-read table: a base file and the log files attached to it.

Completion-time slicing (Hudi 1.x): a log file is attached to its file group, not to a base
file, and belongs to the newest slice whose base instant came before the log's delta commit
completed. Completion order is the commit log's position (`seq`, docs/timeline-protocol.md):

- a base file written by a commit or delta commit starts its slice at that commit's `seq`;
- a base file written by a compaction starts its slice at the log position its plan was
  made at (`log_anchor_seq`): the plan folded every log that completed up to there, and a
  delta commit completing later, even while the compaction runs, belongs to the new slice.
  That is what lets a compaction run without stopping writers or conflicting with them.

Visibility is the timeline's: only completed, not rolled-back commits count, so a rolled-back
delta commit's blocks are never read, and a rolled-back compaction's logs fall back to the
slice before it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..instant import DELTA_COMMIT
from ..metadata import DataFile, Entry
from ..snapshot import TableState
from .logfile import LOG_FILES, LogFile, logs_of

COMPACTION_DETAIL = "compaction"  # commit-metadata field of a compaction (its anchor, plan)


@dataclass(frozen=True)
class MorSlice:
    """A file group's slice as of one log position: base plus logs in completion order."""

    group: str
    partition: str
    base: DataFile
    anchor: int  # the base's slice starts after this log position
    logs: tuple[tuple[int, LogFile], ...] = ()  # (seq of the delta commit, log), oldest first

    @property
    def log_bytes(self) -> int:
        return sum(lf.size for _, lf in self.logs)


def is_merge_on_read(st: TableState) -> bool:
    """Whether any write of the state is a delta commit or a compaction (reads then merge)."""
    return any(
        e.action == DELTA_COMMIT or is_compaction(e) or e.metadata.get(LOG_FILES)
        for e in st.writes.values()
    )


def is_compaction(e: Entry) -> bool:
    """A completed compaction: a `commit` (Hudi's name for it) carrying its plan's anchor."""
    return isinstance(e.metadata.get(COMPACTION_DETAIL), dict)


def anchor_of(e: Entry) -> int:
    if is_compaction(e):
        return int(e.metadata[COMPACTION_DETAIL]["log_anchor_seq"])
    return e.seq


def mor_slices(st: TableState, upto_seq: int | None = None) -> dict[str, MorSlice]:
    """file group -> its latest slice as of `upto_seq` (None: the latest state)."""
    writes = st.ordered_writes(upto_seq)
    anchors: dict[str, int] = {}
    logs: dict[str, list[tuple[int, LogFile]]] = {}
    for e in writes:
        a = anchor_of(e)
        for f in e.added:
            anchors[f.path] = a
        for lf in logs_of(e.metadata):
            logs.setdefault(lf.file_group, []).append((e.seq, lf))
    out: dict[str, MorSlice] = {}
    for group, files in st.file_slices(upto_seq).items():
        base = files[-1]
        a = anchors.get(base.path, 0)
        attached = tuple((s, lf) for s, lf in logs.get(group, ()) if s > a)
        out[group] = MorSlice(group, base.partition, base, a, attached)
    return out


def live_logs(st: TableState) -> dict[str, tuple[int, LogFile]]:
    """Every log block of a live (completed, not rolled-back) delta commit, by `ref` (its
    object's path, with its offset when the object holds several blocks)."""
    return {lf.ref: (e.seq, lf) for e in st.ordered_writes() for lf in logs_of(e.metadata)}
