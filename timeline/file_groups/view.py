"""The one view of a table's file groups at an instant, folded from its completed writes in
completion order (never from listings). Snapshot reads, cleaning, clustering, compaction,
incremental and CDC reads and Spark all take their file groups and slices from here.

Where a base file's slice starts (its anchor, the rule model.py applies):
- a base file written by a commit or delta commit starts its slice at that commit's `seq`;
- a base file written by a compaction starts its slice at the log position its plan was
  made at (`log_anchor_seq`): the plan folded every log that completed up to there, and a
  delta commit completing later, even while the compaction runs, belongs to the new slice.
  That is what lets a compaction run without stopping writers or conflicting with them.

Visibility is the timeline's: only completed, not rolled-back writes are folded, so a
rolled-back delta commit's blocks are never read, and a rolled-back compaction's logs fall
back to the slice before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..instant import DELTA_COMMIT
from ..metadata import DataFile, Entry
from .log_files import LOG_FILES, LogFile, logs_of
from .model import FileGroup, FileSlice

COMPACTION_DETAIL = "compaction"  # commit-metadata field of a compaction (its anchor, plan)


def is_compaction(e: Entry) -> bool:
    """A completed compaction: a `commit` (Hudi's name for it) carrying its plan's anchor."""
    return isinstance(e.metadata.get(COMPACTION_DETAIL), dict)


def anchor_of(e: Entry) -> int:
    """Where the slices of the base files `e` wrote start (see the module's docstring)."""
    if is_compaction(e):
        return int(e.metadata[COMPACTION_DETAIL]["log_anchor_seq"])
    return e.seq


def merges_on_read(e: Entry) -> bool:
    """Whether a write makes its table merge on read: a delta commit, a compaction, or a
    write that records log blocks."""
    return e.action == DELTA_COMMIT or is_compaction(e) or bool(e.metadata.get(LOG_FILES))


@dataclass(frozen=True)
class FileGroupView:
    """The file groups of a table as of one log position (`seq`; 0: the empty table)."""

    seq: int
    groups: Mapping[str, FileGroup]

    def latest_slices(self) -> dict[str, FileSlice]:
        """file group -> its latest slice."""
        return {g: fg.latest for g, fg in self.groups.items()}

    def base_files(self) -> dict[str, list[DataFile]]:
        """file group -> its base files, oldest first."""
        return {g: list(fg.base_files) for g, fg in self.groups.items()}

    def latest_base(self, group: str) -> DataFile | None:
        fg = self.groups.get(group)
        return fg.bases[-1][0] if fg is not None else None


class FileGroupFold:
    """Completed writes folded one at a time, in completion order, into file groups: the one
    place a write's effect on file groups is stated. `view()` is the result so far; walkers
    (incremental and CDC reads) ask `touched` and `latest_base` between writes."""

    def __init__(self) -> None:
        self._bases: dict[str, list[tuple[DataFile, int]]] = {}
        self._logs: dict[str, list[tuple[int, LogFile]]] = {}
        self._seq = 0

    @staticmethod
    def of(writes: Iterable[Entry]) -> FileGroupView:
        fold = FileGroupFold()
        for e in writes:
            fold.apply(e)
        return fold.view()

    def touched(self, e: Entry) -> set[str]:
        """The file groups write `e` changes, asked before it is applied: those it adds to,
        replaces or appends logs to, and every group of a partition it overwrites."""
        out = {f.group for f in (*e.added, *e.replaced)}
        out |= {lf.file_group for lf in logs_of(e.metadata)}
        gone = e.replaced_partitions
        if gone:
            out |= {g for g, bs in self._bases.items() if bs[-1][0].partition in gone}
        return out

    def apply(self, e: Entry) -> None:
        for f in e.replaced:
            self._bases.pop(f.group, None)
        gone = e.replaced_partitions
        if gone:
            for g in [g for g, bs in self._bases.items() if bs[-1][0].partition in gone]:
                del self._bases[g]
        anchor = anchor_of(e)
        for f in e.added:
            self._bases.setdefault(f.group, []).append((f, anchor))
        for lf in logs_of(e.metadata):
            self._logs.setdefault(lf.file_group, []).append((e.seq, lf))
        self._seq = e.seq

    def latest_base(self, group: str) -> DataFile | None:
        bs = self._bases.get(group)
        return bs[-1][0] if bs else None

    def latest_slice(self, group: str) -> FileSlice | None:
        bs = self._bases.get(group)
        if not bs:
            return None
        return FileGroup(group, tuple(bs), tuple(self._logs.get(group, ()))).latest

    def view(self) -> FileGroupView:
        groups = {
            g: FileGroup(g, tuple(bs), tuple(self._logs.get(g, ())))
            for g, bs in self._bases.items()
        }
        return FileGroupView(self._seq, groups)
