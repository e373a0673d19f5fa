"""File groups and file slices: the value types a table's data is made of (no I/O).

A file group is the life of one set of records (a Hudi file id): a chain of base files, each
newer one superseding the one before, and the log blocks delta commits appended to the group.
A file slice is one base file with the log blocks that apply on top of it: merged, they are
what the group holds as of the slice. A copy-on-write table's slices have no logs.

The completion-time rule (Hudi 1.x) says which slice a log block belongs to, and is stated
here once (`slice_index`): a log block is attached to its file group, not to a base file, and
belongs to the newest slice whose base's anchor came before the block's delta commit
completed. Completion order is the commit log's position (`seq`, docs/timeline-protocol.md).
Where anchors come from is the view's business (view.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..metadata import DataFile
from .log_files import LogFile


def slice_index(anchors: Sequence[int], log_seq: int) -> int | None:
    """The completion-time rule: the index of the newest slice (anchors oldest first) whose
    anchor is before the log position `log_seq`; None when the block precedes every base."""
    for i in range(len(anchors) - 1, -1, -1):
        if anchors[i] < log_seq:
            return i
    return None


@dataclass(frozen=True)
class FileSlice:
    """One base file and the log blocks on top of it, oldest first."""

    group: str
    partition: str
    base: DataFile
    anchor: int  # the slice starts after this log position
    logs: tuple[tuple[int, LogFile], ...] = ()  # (seq of the delta commit, block)

    @property
    def log_bytes(self) -> int:
        return sum(lf.size for _, lf in self.logs)

    def objects(self) -> set[str]:
        """The objects a merged read of the slice takes: its base file and log objects."""
        return {self.base.path} | {lf.path for _, lf in self.logs}


@dataclass(frozen=True)
class FileGroup:
    """A file group as of one log position: its base files and its live log blocks, each in
    completion order. Slices are cut from them by the completion-time rule on demand."""

    group: str
    bases: tuple[tuple[DataFile, int], ...]  # (base file, its anchor), oldest first
    logs: tuple[tuple[int, LogFile], ...] = ()  # (seq of the delta commit, block)

    @property
    def partition(self) -> str:
        return self.bases[-1][0].partition

    @property
    def base_files(self) -> tuple[DataFile, ...]:
        return tuple(f for f, _ in self.bases)

    @property
    def latest(self) -> FileSlice:
        return self.slices(1)[0]

    def slices(self, newest: int | None = None) -> tuple[FileSlice, ...]:
        """The group's slices, oldest first; `newest`: only the newest that many."""
        anchors = [a for _, a in self.bases]
        first = 0 if newest is None else max(len(anchors) - newest, 0)
        attached: list[list[tuple[int, LogFile]]] = [[] for _ in anchors]
        for seq, lf in self.logs:
            i = slice_index(anchors, seq)
            if i is not None and i >= first:
                attached[i].append((seq, lf))
        return tuple(
            FileSlice(self.group, f.partition, f, a, tuple(attached[i]))
            for i, (f, a) in enumerate(self.bases)
            if i >= first
        )

    def planned_slice(self, base_path: str, log_refs: Iterable[str]) -> FileSlice | None:
        """The slice of base file `base_path` with exactly the blocks `log_refs` names (by
        `LogFile.ref`, as a compaction plan does), oldest first; None when the group no
        longer has that base or one of those blocks (a rolled-back delta commit's)."""
        found = [(f, a) for f, a in self.bases if f.path == base_path]
        live = {lf.ref: (seq, lf) for seq, lf in self.logs}
        refs = list(log_refs)
        if not found or any(r not in live for r in refs):
            return None
        base, anchor = found[-1]
        picked = sorted((live[r] for r in refs), key=lambda x: x[0])
        return FileSlice(self.group, base.partition, base, anchor, tuple(picked))
