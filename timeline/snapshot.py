"""Table state folded from completed log entries in completion order (never from listings)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from .file_groups import FileGroupFold, FileGroupView, FileSlice, LogFile, logs_of, merges_on_read
from .instant import CLEAN, RESTORE, ROLLBACK, SAVEPOINT, parse_name
from .metadata import DataFile, Entry
from .schema import entry_schema


@dataclass(frozen=True)
class Snapshot:
    """The files a reader sees as of one completed instant."""

    instant_time: str
    files: tuple[DataFile, ...]
    #: Log position of the last completion included (0 = empty table).
    seq: int = 0
    #: The file groups the files are the latest bases of, when the table merges on read
    #: (None: its files are the whole answer).
    groups: FileGroupView | None = field(default=None, compare=False, repr=False)

    def merge_on_read_slices(self) -> list[FileSlice] | None:
        """The file slices (base plus logs) a merged read of this snapshot covers, one per
        file group in base-file order, for an engine that merges them in its own tasks
        (`read_slice`); None when the table has no delta commits (its files are the whole
        answer)."""
        if self.groups is None:
            return None
        return sorted(self.groups.latest_slices().values(), key=lambda sl: sl.base.path)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def partitions(self) -> list[str]:
        return sorted({f.partition for f in self.files})


@dataclass
class TableState:
    """Every live write (not rolled back), cleans and savepoints, in completion order."""

    writes: dict[str, Entry] = field(default_factory=dict)  # instant time -> entry
    cleans: list[Entry] = field(default_factory=list)
    savepoints: dict[str, Entry] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)

    @staticmethod
    def fold(entries: Iterable[Entry]) -> TableState:
        st = TableState()
        for e in sorted(entries, key=lambda e: e.seq):
            st.entries.append(e)
            if e.is_write:
                st.writes[e.time] = e
            elif e.action == CLEAN:
                st.cleans.append(e)
            elif e.action == SAVEPOINT:
                st.savepoints[e.time] = e
            elif e.action in (ROLLBACK, RESTORE):
                for name in e.rolled_back:
                    gone = parse_name(name)
                    st.writes.pop(gone.time, None)
                    st.savepoints.pop(gone.time, None)
        return st

    def ordered_writes(self, upto_seq: int | None = None) -> list[Entry]:
        ws = sorted(self.writes.values(), key=lambda e: e.seq)
        return [e for e in ws if upto_seq is None or e.seq <= upto_seq]

    def file_groups(self, upto_seq: int | None = None) -> FileGroupView:
        """The file groups as of `upto_seq` (None: the latest state)."""
        return FileGroupFold.of(self.ordered_writes(upto_seq))

    def file_slices(self, upto_seq: int | None = None) -> dict[str, list[DataFile]]:
        """file group -> its base files, oldest first, as of `upto_seq`."""
        return self.file_groups(upto_seq).base_files()

    def latest_slices(self, upto_seq: int | None = None) -> dict[str, FileSlice]:
        """file group -> its latest slice (base and logs) as of `upto_seq`."""
        return self.file_groups(upto_seq).latest_slices()

    def is_merge_on_read(self) -> bool:
        """Whether any write is a delta commit or a compaction (reads then merge)."""
        return any(merges_on_read(e) for e in self.writes.values())

    def live_logs(self) -> dict[str, tuple[int, LogFile]]:
        """Every log block of a live (completed, not rolled-back) delta commit, by `ref` (its
        object's path, with its offset when the object holds several blocks)."""
        return {lf.ref: (e.seq, lf) for e in self.ordered_writes() for lf in logs_of(e.metadata)}

    def snapshot(self, upto_seq: int | None = None) -> Snapshot:
        ws = self.ordered_writes(upto_seq)
        view = FileGroupFold.of(ws)
        files = tuple(
            sorted((fg.bases[-1][0] for fg in view.groups.values()), key=lambda f: f.path)
        )
        last = ws[-1] if ws else None
        groups = view if self.is_merge_on_read() else None
        return Snapshot(last.time if last else "", files, last.seq if last else 0, groups)

    def all_files(self) -> dict[str, DataFile]:
        return {f.path: f for e in self.ordered_writes() for f in e.added}

    def cleaned(self) -> set[str]:
        return {p for c in self.cleans for p in c.deleted}

    def cleaned_before_seq(self) -> int:
        """Snapshots before this log position may reference cleaned files."""
        return max((int(c.metadata.get("retain_from_seq", 0)) for c in self.cleans), default=0)

    def retention(self) -> str:
        """What the clean that set `cleaned_before_seq` kept, and the earliest instant a
        time-travel read may still ask for, in words (for refusals)."""
        if not self.cleans:
            return ""
        last = max(self.cleans, key=lambda c: int(c.metadata.get("retain_from_seq", 0)))
        n, policy = last.metadata.get("retained"), last.metadata.get("policy")
        kept = (
            f"the newest {n} file versions"
            if policy == "KEEP_LATEST_FILE_VERSIONS"
            else f"the last {n} commits"
        )
        start = self.cleaned_before_seq()
        first = next((e.time for e in self.ordered_writes() if e.seq >= start), "")
        earliest = f"; the earliest readable instant is {first}" if first else ""
        return f"the clean {last.time} kept {kept}{earliest}"

    def schema(self, upto_seq: int | None = None) -> pa.Schema | None:
        """The table schema the latest write (as of `upto_seq`) states; None if none does."""
        for e in reversed(self.ordered_writes(upto_seq)):
            found = entry_schema(e.metadata)
            if found is not None:
                return found
        return None

    def seq_as_of(self, time: str) -> int:
        """The log position a time-travel read `as_of` an instant time sees."""
        exact = self.writes.get(time)  # a savepoint shares its commit's instant time
        if exact is not None:
            return exact.seq
        candidates = [e.seq for e in self.writes.values() if e.time <= time]
        return max(candidates, default=0)
