"""The task side of a compaction, for any engine: one planned file group's base file and logs
merged into its new base file.

`compaction.start` (the driver: plan read and checked, `compaction.inflight`, a heartbeating
transaction) hands out a `CompactionWork` — plain data, picklable — and each task runs
`compact_file_group` for its slices with a `TaskWriter` of its own; `compaction.complete`
commits what the tasks return. The Python executor runs the same function on threads, so
both paths write byte-identical base files under the same names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from storage import ObjectStore

from ... import crash
from ...file_groups import FileSlice
from ...instant import COMPACTION
from ...metadata import DataFile
from ...task_writer import TaskWriter, WriteTarget
from ..index import bloom_ref
from ..keys import RECORD_KEY_COL, key_range
from ..log import LogCache
from ..read import read_slice


@dataclass(frozen=True)
class CompactionWork:
    """What every task of one compaction needs (picklable)."""

    #: The compaction's instant; no heartbeat interval: the process that started the
    #: compaction heartbeats for it, so tasks never write a beat that could outlive it.
    target: WriteTarget
    #: The schema of the new base files (the table's as of the plan's anchor).
    schema: pa.Schema
    bloom_fpp: float
    #: The planned slices, in plan order: base file and logs of each file group.
    slices: tuple[FileSlice, ...]
    #: The table's single integer record key column, which the merge matches keys by
    #: (keys.integer_key_column); None: by the record key text.
    key_col: str | None = None

    @property
    def instant_time(self) -> str:
        return self.target.instant_time

    def writer(self, store: ObjectStore) -> TaskWriter:
        """A writer for the base files. Not guarded: a base file's name is fixed by the plan,
        so a straggling attempt rewrites the same bytes another attempt may have had
        committed, and must never delete them."""
        return TaskWriter(store, self.target, guard=False)


def base_file_name(group: str, instant_time: str) -> str:
    """A compacted base file's name, fixed by the plan: a re-execution writes the same key."""
    return f"{group}_{instant_time}.parquet"


def compact_file_group(
    writer: TaskWriter, work: CompactionWork, sl: FileSlice, *, cache: LogCache | None = None
) -> tuple[DataFile, dict[str, Any]]:
    """Merge one slice (base + logs, by the table's merge) into its new base file; returns
    the file and its write stats (the compaction commit's per-file record). `cache`: the
    plan's log objects, shared by the tasks of one process (else a ranged GET per block)."""
    rows = read_slice(writer.store, sl, work.schema, cache=cache, key_col=work.key_col)
    name = base_file_name(sl.group, work.instant_time)
    f = writer.write(rows, sl.partition, file_group=sl.group, name=name)
    assert f is not None  # unguarded writers always describe what they wrote
    lo, hi = key_range(rows)
    keys = rows.column(RECORD_KEY_COL)
    stat = {
        "path": f.path,
        "file_group": sl.group,
        "partition": sl.partition,
        "prev_commit": None,
        "prev_path": sl.base.path,
        "inserts": 0,
        "updates": 0,
        "deletes": 0,
        "rows": rows.num_rows,
        "bytes": f.size,
        "min_key": lo,
        "max_key": hi,
        "log_files": len(sl.logs),
        "log_bytes": sl.log_bytes,
        **bloom_ref(writer.store, f.path, keys, work.bloom_fpp),
    }
    crash.point(f"{COMPACTION}.base_written")
    return f, stat


__all__ = ["CompactionWork", "base_file_name", "compact_file_group"]
