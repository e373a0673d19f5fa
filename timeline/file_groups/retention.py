"""What the cleaner must keep of a merge-on-read table, and which log files it may delete.

A slice is its base file and its log files (timeline/file_groups), so whatever keeps a
slice keeps both:
- KEEP_LATEST_COMMITS: every slice a snapshot of the retained commits reads (time travel and
  incremental readers within the retention window);
- KEEP_LATEST_FILE_VERSIONS: the newest N slices of each file group;
- always: the slices a savepointed snapshot reads, and the base and logs a pending
  compaction's plan names (its executor reads them; it may run again after a crash).
Logs of older slices go with their base files.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..instant import COMPACTION, Instant, State
from ..metadata import decode_plan
from .log_files import ref_path
from .view import COMPACTION_DETAIL

if TYPE_CHECKING:
    from ..snapshot import TableState
    from ..table_context import TableContext


def slice_paths(st: TableState, seqs: Iterable[int]) -> set[str]:
    """Base and log files of every slice the snapshots at these log positions read."""
    out: set[str] = set()
    for seq in set(seqs):
        for sl in st.latest_slices(seq).values():
            out |= sl.objects()
    return out


def newest_versions(st: TableState, retained: int) -> set[str]:
    """Base and log files of the newest `retained` slices of each file group."""
    out: set[str] = set()
    for fg in st.file_groups().groups.values():
        for sl in fg.slices(retained):
            out |= sl.objects()
    return out


def pending_compaction_paths(table: TableContext) -> set[str]:
    out: set[str] = set()
    for i in table.timeline(refresh=False).pending().actions(COMPACTION):
        req = Instant(i.time, COMPACTION, State.REQUESTED)
        try:
            plan: dict[str, Any] = decode_plan(table.tl.states.read(req))
        except Exception:
            continue
        for op in plan.get(COMPACTION_DETAIL, {}).get("operations", ()):
            out.add(str(op["base_path"]))
            out.update(ref_path(str(p)) for p in op["log_paths"])
    return out


def log_candidates(st: TableState) -> set[str]:
    """Log objects the cleaner may delete once no kept slice reads a block of theirs."""
    return {lf.path for _, lf in st.live_logs().values()} - st.cleaned()
