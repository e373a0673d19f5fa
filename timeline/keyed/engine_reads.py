"""Incremental and CDC reads split for an engine that runs the file reads in its tasks.

The driver plans from commit metadata alone (`plan_changes`: no data file is read); each
task then reads one unit: a file of the incremental read, filtered to the range's commit
times (`read_changed_file`), or one commit of the CDC read, whose slices before and after it
are compared (`read_commit_changes`). The rows are those `Table.changes` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import ObjectStore

from ..metadata import DataFile
from ..parquet_io import read_files
from .changes import (
    DELETE,
    INSERT,
    UPDATE,
    ChangeRange,
    apply_write,
    cdc_schema,
    change_row,
    record_identity,
    touched_groups,
)
from .keys import COMMIT_TIME_COL, RECORD_KEY_COL
from .properties import KeyedProperties

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class CommitUnit:
    """One commit of a CDC range: the touched groups' slices before and after it."""

    instant: str
    before: tuple[DataFile, ...]
    after: tuple[DataFile, ...]


@dataclass(frozen=True)
class ChangesPlan:
    """What the tasks of an incremental (`files`) or CDC (`commits`) read need (picklable)."""

    schema: pa.Schema | None  # the table's schema as of the range's end
    times: tuple[str, ...]  # the commits of the range
    files: tuple[DataFile, ...] = ()
    commits: tuple[CommitUnit, ...] = ()
    cdc: bool = False

    @property
    def output_schema(self) -> pa.Schema:
        if self.cdc:
            return cdc_schema(self.schema)
        return self.schema if self.schema is not None else pa.schema([])


def plan_changes(
    table: Table,
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
    groups: dict[str, list[DataFile]] = {}
    if not cdc:
        if full_scan:
            files = list(r.st.snapshot(r.end_seq).files)
        else:
            r.check_readable(cdc=False)
            touched: set[str] = set()
            for e in r.writes:
                apply_write(e, groups)
                if e.seq > r.begin_seq:
                    touched |= {f.group for f in e.added}
            files = [groups[g][-1] for g in touched if g in groups]
        ordered = tuple(sorted(files, key=lambda f: f.path))
        return ChangesPlan(r.schema, times, files=ordered)
    r.check_readable(cdc=True)
    units = []
    for e in r.writes:
        if e.seq <= r.begin_seq:
            apply_write(e, groups)
            continue
        touched = touched_groups(e, groups)
        before = tuple(groups[g][-1] for g in sorted(touched) if g in groups)
        apply_write(e, groups)
        after = tuple(groups[g][-1] for g in sorted(touched) if g in groups)
        units.append(CommitUnit(e.time, before, after))
    return ChangesPlan(r.schema, times, commits=tuple(units), cdc=True)


def _read(store: ObjectStore, plan: ChangesPlan, files: Sequence[DataFile]) -> pa.Table:
    got = read_files(store, list(files), None, plan.schema)
    if got is None:
        return plan.schema.empty_table() if plan.schema is not None else pa.table({})
    return got


def read_changed_file(store: ObjectStore, plan: ChangesPlan, f: DataFile) -> pa.Table:
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

    def by_id(files: Sequence[DataFile]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for f in files:
            for row in _read(store, plan, [f]).to_pylist():
                out[record_identity(f, str(row[RECORD_KEY_COL]), props)] = row
        return out

    before, after = by_id(unit.before), by_id(unit.after)
    changes: list[dict[str, Any]] = []
    for ident, row in after.items():
        if row.get(COMMIT_TIME_COL) != unit.instant:
            continue  # copied unchanged into the new slice
        old = before.get(ident)
        changes.append(
            change_row(UPDATE if old is not None else INSERT, unit.instant, row, old, row)
        )
    for ident, old in before.items():
        if ident not in after:
            changes.append(change_row(DELETE, unit.instant, old, old, None))
    changes.sort(key=lambda c: (c["record_key"], c["op"]))
    return pa.Table.from_pylist(changes, schema=plan.output_schema)


__all__ = [
    "ChangesPlan",
    "CommitUnit",
    "plan_changes",
    "read_changed_file",
    "read_commit_changes",
]
