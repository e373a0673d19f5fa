"""Incremental and CDC reads split for an engine that runs the file reads in its tasks.

The driver plans from commit metadata alone (`plan_changes`: no data file is read); each
task then reads one unit: a file of the incremental read, filtered to the range's commit
times (`read_changed_file`), or one commit of the CDC read, whose slices before and after it
are compared (`read_commit_changes`). The rows are those `Table.changes` returns.

A merge-on-read table's units are file slices (base and logs) read merged, as
`Table.changes` reads them: its delta commits' changes are in logs, which a read of base
files alone would miss (an empty answer, not an error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import ObjectStore

from ...file_groups import FileGroupFold, FileSlice, is_compaction, logs_of
from ...metadata import DataFile
from ...parquet_io import read_files
from ..keys import COMMIT_TIME_COL, integer_key_column
from ..properties import MERGE_ON_READ, KeyedProperties
from ..read import read_slices
from .ranges import ChangeRange, cdc_schema, commit_changes, rows_by_identity, walk

if TYPE_CHECKING:
    from ..context import KeyedTable


#: What a task reads: a copy-on-write file slice (its base file), or a merge-on-read slice
#: (its base merged with its logs).
Unit = DataFile | FileSlice


@dataclass(frozen=True)
class CommitUnit:
    """One commit of a CDC range: the touched groups' slices before and after it."""

    instant: str
    before: tuple[Unit, ...]
    after: tuple[Unit, ...]


@dataclass(frozen=True)
class ChangesPlan:
    """What the tasks of an incremental (`files`) or CDC (`commits`) read need (picklable)."""

    schema: pa.Schema | None  # the table's schema as of the range's end
    times: tuple[str, ...]  # the commits of the range
    files: tuple[Unit, ...] = ()
    commits: tuple[CommitUnit, ...] = ()
    cdc: bool = False
    key_col: str | None = None  # a single integer record key (merged reads match by it)

    @property
    def output_schema(self) -> pa.Schema:
        if self.cdc:
            return cdc_schema(self.schema)
        return self.schema if self.schema is not None else pa.schema([])


def plan_changes(
    table: KeyedTable,
    props: KeyedProperties,
    begin: str | None,
    end: str | None = None,
    *,
    cdc: bool = False,
    full_scan: bool = False,
) -> ChangesPlan:
    """The units of `table.changes(begin, end, cdc=cdc, full_scan=full_scan)`; raises
    `RangeNotReadable` as it does."""
    if cdc and full_scan:
        raise ValueError("full_scan applies to incremental reads: CDC needs every slice")
    r = ChangeRange(table, begin, end)
    times = tuple(sorted({e.time for e in r.in_range}))
    if props.table_type == MERGE_ON_READ:
        return _plan_merge_on_read(r, props, times, cdc=cdc, full_scan=full_scan)
    if not cdc:
        if full_scan:
            files = list(r.st.snapshot(r.end_seq).files)
        else:
            r.check_readable(cdc=False)
            view = FileGroupFold.of(r.writes)
            touched = {f.group for e in r.in_range for f in e.added}
            files = [f for g in touched if (f := view.latest_base(g)) is not None]
        ordered = tuple(sorted(files, key=lambda f: f.path))
        return ChangesPlan(r.schema, times, files=ordered)
    r.check_readable(cdc=True)
    units = [
        CommitUnit(e.time, tuple(sl.base for sl in before), tuple(sl.base for sl in after))
        for e, before, after in walk(r.writes, r.begin_seq)
    ]
    return ChangesPlan(r.schema, times, commits=tuple(units), cdc=True)


def _plan_merge_on_read(
    r: ChangeRange, props: KeyedProperties, times: tuple[str, ...], *, cdc: bool, full_scan: bool
) -> ChangesPlan:
    """`plan_changes` of a merge-on-read table: the slices `mor_changes` reads."""
    key_col = integer_key_column(props, r.schema)
    if not cdc:
        slices = r.st.latest_slices(r.end_seq)
        if full_scan:
            picked = list(slices.values())
        else:
            r.check_readable(cdc=False)
            touched = {
                g
                for e in r.in_range
                if not is_compaction(e)
                for g in (
                    *(f.group for f in e.added),
                    *(lf.file_group for lf in logs_of(e.metadata)),
                )
            }
            picked = [slices[g] for g in sorted(touched) if g in slices]
        ordered = tuple(sorted(picked, key=lambda sl: sl.base.path))
        return ChangesPlan(r.schema, times, files=ordered, key_col=key_col)
    r.check_readable(cdc=True)
    units = [
        CommitUnit(e.time, tuple(before), tuple(after))
        for e, before, after in walk(r.writes, r.begin_seq)
        if not is_compaction(e)  # a compaction changes no record
    ]
    return ChangesPlan(r.schema, times, commits=tuple(units), cdc=True, key_col=key_col)


def _read(store: ObjectStore, plan: ChangesPlan, files: Sequence[Unit]) -> pa.Table:
    slices = [u for u in files if isinstance(u, FileSlice)]
    if slices:
        got = read_slices(store, slices, plan.schema, key_col=plan.key_col)
    else:
        got = read_files(store, [u for u in files if isinstance(u, DataFile)], None, plan.schema)
    if got is None:
        return plan.schema.empty_table() if plan.schema is not None else pa.table({})
    return got


def read_changed_file(store: ObjectStore, plan: ChangesPlan, f: Unit) -> pa.Table:
    """The rows of one file of an incremental read that a commit of the range wrote."""
    data = _read(store, plan, [f])
    if data.num_rows == 0 or COMMIT_TIME_COL not in data.column_names:
        return data.slice(0, 0)
    times = pa.array(list(plan.times), pa.string())
    return data.filter(pc.is_in(data.column(COMMIT_TIME_COL), value_set=times))


def read_commit_changes(
    store: ObjectStore, plan: ChangesPlan, props: KeyedProperties, unit: CommitUnit
) -> pa.Table:
    """The CDC rows of one commit, in the order `Table.changes(cdc=True)` gives them."""

    def by_id(files: Sequence[Unit]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for f in files:
            base = f.base if isinstance(f, FileSlice) else f
            out.update(rows_by_identity(_read(store, plan, [f]), base, props))
        return out

    changes = commit_changes(unit.instant, by_id(unit.before), by_id(unit.after))
    return pa.Table.from_pylist(changes, schema=plan.output_schema)


__all__ = [
    "ChangesPlan",
    "CommitUnit",
    "plan_changes",
    "read_changed_file",
    "read_commit_changes",
]
