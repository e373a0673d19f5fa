"""Incremental and CDC reads split for an engine that runs the file reads in its tasks.

The driver plans from commit metadata alone (`plan_changes`: no data file is read); each
task then reads one unit: a file of the incremental read, filtered to the range's commit
times (`read_changed_file`), or one commit of the CDC read, whose slices before and after it
are compared (`read_commit_changes`). The rows are those `Table.changes` returns.

Units are file slices read merged with their logs, as `Table.changes` reads them, for both
table types (a copy-on-write slice is its base file alone; a merge-on-read table's delta
commits' changes are in logs, which a read of base files alone would miss).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from storage import ObjectStore

from ...file_groups import FileSlice, is_compaction
from ..keys import integer_key_column
from ..properties import KeyedProperties
from ..read import read_slices
from .ranges import (
    ChangeRange,
    cdc_schema,
    commit_changes,
    incremental_slices,
    rows_by_identity,
    walk,
    written_in,
)

if TYPE_CHECKING:
    from ..context import KeyedTable


@dataclass(frozen=True)
class CommitUnit:
    """One commit of a CDC range: the touched groups' slices before and after it."""

    instant: str
    before: tuple[FileSlice, ...]
    after: tuple[FileSlice, ...]


@dataclass(frozen=True)
class ChangesPlan:
    """What the tasks of an incremental (`files`) or CDC (`commits`) read need (picklable)."""

    schema: pa.Schema | None  # the table's schema as of the range's end
    times: tuple[str, ...]  # the commits of the range
    files: tuple[FileSlice, ...] = ()
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
    """The units of `table.changes(begin, end, cdc=cdc, full_scan=full_scan)`, the slices
    it reads (ranges.py), for either table type; raises `RangeNotReadable` as it does."""
    if cdc and full_scan:
        raise ValueError("full_scan applies to incremental reads: CDC needs every slice")
    r = ChangeRange(table, begin, end)
    times = tuple(sorted({e.time for e in r.in_range}))
    key_col = integer_key_column(props, r.schema)
    if not cdc:
        files = tuple(incremental_slices(r, full_scan))
        return ChangesPlan(r.schema, times, files=files, key_col=key_col)
    r.check_readable(cdc=True)
    units = [
        CommitUnit(e.time, tuple(before), tuple(after))
        for e, before, after in walk(r.writes, r.begin_seq)
        if not is_compaction(e)  # a compaction changes no record
    ]
    return ChangesPlan(r.schema, times, commits=tuple(units), cdc=True, key_col=key_col)


def _read(store: ObjectStore, plan: ChangesPlan, slices: Sequence[FileSlice]) -> pa.Table:
    got = read_slices(store, slices, plan.schema, key_col=plan.key_col)
    if got is None:
        return plan.schema.empty_table() if plan.schema is not None else pa.table({})
    return got


def read_changed_file(store: ObjectStore, plan: ChangesPlan, f: FileSlice) -> pa.Table:
    """The rows of one file slice of an incremental read that a commit of the range wrote."""
    return written_in(_read(store, plan, [f]), plan.times)


def read_commit_changes(
    store: ObjectStore, plan: ChangesPlan, props: KeyedProperties, unit: CommitUnit
) -> pa.Table:
    """The CDC rows of one commit, in the order `Table.changes(cdc=True)` gives them."""

    def by_id(slices: Sequence[FileSlice]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for sl in slices:
            out.update(rows_by_identity(_read(store, plan, [sl]), sl.base, props))
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
