"""Incremental and CDC reads of a keyed table between two instants, by completion order.

- incremental: the latest state (as of `end`) of every record written in `(begin, end]`:
  the rows of the touched file groups whose `_flowledger_commit_time` is a commit of the
  range (deleted records are absent, as in Hudi's incremental query);
- CDC: one row per change, in completion order: `op` (i, u, d), the `instant`, the record
  key, and the `before` / `after` images (structs in the table's schema as of `end`).

Both read only the file slices the range's commits wrote (and, for CDC, the slices they
superseded). A range that reaches archived instants or cleaned slices raises
`RangeNotReadable` naming the earliest instant a read may begin at; `full_scan=True` (the
incremental read only) reads the whole snapshot as of `end` instead and filters it by commit
time, as Hudi's `hoodie.datasource.read.incr.fallback.fulltablescan.enable` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import NotFound

from ...errors import InstantNotFound, MissingTableObject, RangeNotReadable
from ...file_groups import FileGroupFold, FileSlice, is_compaction
from ...file_groups.log_files import logs_of
from ...file_groups.sidecars import WRITE_STATS
from ...metadata import DataFile, Entry
from ...snapshot import TableState
from ..keys import COMMIT_TIME_COL, RECORD_KEY_COL, integer_key_column
from ..policies import KeyScope
from ..properties import KeyedProperties
from ..read import read_slices

if TYPE_CHECKING:
    from ..context import KeyedTable

INSERT, UPDATE, DELETE = "i", "u", "d"


def _seq_of(st: TableState, time: str | None, default: int, what: str, uri: str) -> int:
    if time is None:
        return default
    e = st.writes.get(time)
    if e is not None:
        return e.seq
    seq = st.seq_as_of(time)
    if seq == 0 and st.writes and time < min(st.writes):
        return 0  # before the first commit: everything is after it
    if seq == 0 and what == "end":
        raise InstantNotFound(f"{uri}: no commit at or before {time}")
    return seq


def walk(
    writes: Iterable[Entry], begin_seq: int
) -> Iterator[tuple[Entry, list[FileSlice], list[FileSlice]]]:
    """Each write after `begin_seq`, in completion order, with the latest slices of the file
    groups it touches just before and just after it (one fold over the writes)."""
    fold = FileGroupFold()
    for e in writes:
        if e.seq <= begin_seq:
            fold.apply(e)
            continue
        touched = sorted(fold.touched(e))
        before = [sl for g in touched if (sl := fold.latest_slice(g)) is not None]
        fold.apply(e)
        after = [sl for g in touched if (sl := fold.latest_slice(g)) is not None]
        yield e, before, after


class ChangeRange:
    def __init__(self, table: KeyedTable, begin: str | None, end: str | None) -> None:
        self.table = table
        self.begin, self.end = begin, end
        self.st = table.state()
        self.mor = self.st.is_merge_on_read()
        writes = self.st.ordered_writes()
        last = writes[-1].seq if writes else 0
        self.begin_seq = _seq_of(self.st, begin, 0, "begin", table.uri)
        self.end_seq = _seq_of(self.st, end, last, "end", table.uri)
        self.writes = [e for e in writes if e.seq <= self.end_seq]
        self.in_range = [e for e in self.writes if e.seq > self.begin_seq]
        self.schema = self.st.schema(self.end_seq)
        self._reads: dict[int, set[str]] | None = None  # write seq -> what CDC reads

    def check_readable(self, cdc: bool, reads: Iterable[str] = ()) -> None:
        """RangeNotReadable unless every object the read needs is there: what each write of
        the range wrote and, for CDC, the file slices before and after it (base files and
        logs, merged ones included); `reads`: further objects the read takes (the slices
        an incremental read takes as of `end`)."""
        active = {i.time for i in self.table.timeline(refresh=False).completed()}
        cleaned = self.st.cleaned()
        unreadable = [e for e in self.in_range if not self._readable(e, active, cleaned, cdc)]
        if not unreadable and not cleaned.intersection(reads):
            return
        read = f"{'CDC' if cdc else 'incremental'} read of {self.table.uri}"
        if not unreadable:  # no begin helps: what the range's rows are read from is gone
            raise RangeNotReadable(
                f"{read} up to {self._name(self.end_seq)}: the file slices as of it were "
                "cleaned; read up to a later end"
            )
        earliest = self._earliest(active, cleaned, cdc)
        bad = unreadable[-1]
        why = "was archived" if bad.time not in active else "reads cleaned file slices"
        raise RangeNotReadable(
            f"{read} from {self._name(self.begin_seq)}: instant {bad.time} {why}; the earliest "
            f"readable begin is {earliest or '(none)'}"
            + ("" if cdc else " (or read with full_scan=True)"),
            earliest,
        )

    @contextmanager
    def reading(self, cdc: bool) -> Iterator[None]:
        """A committed object gone while the range is read: a clean that completed meanwhile
        is RangeNotReadable (checked against the table as it is now); anything else (a
        damaged table) stays the error."""
        try:
            yield
        except (NotFound, MissingTableObject):
            ChangeRange(self.table, self.begin, self.end).check_readable(cdc)
            raise

    def _name(self, seq: int) -> str:
        e = next((w for w in self.writes if w.seq == seq), None)
        return e.time if e else "the beginning"

    def _readable(self, e: Entry, active: set[str], cleaned: set[str], cdc: bool) -> bool:
        if e.time not in active:
            return False
        needed = {f.path for f in e.added} | {lf.path for lf in logs_of(e.metadata)}
        if cdc:
            needed |= {f.path for f in e.replaced}
            stats = e.metadata.get(WRITE_STATS, ())
            needed |= {str(s["prev_path"]) for s in stats if s.get("prev_path")}
            needed |= self.cdc_reads(e)
        return cleaned.isdisjoint(needed)

    def cdc_reads(self, e: Entry) -> set[str]:
        """The objects a CDC read of write `e` reads: its touched file groups' slices just
        before and just after it (a merge-on-read slice is its base and its logs)."""
        if self._reads is None:  # one walk over the writes, as the CDC read walks them
            self._reads = {}
            for w, before, after in walk(self.st.ordered_writes(), 0):
                if not (self.mor and is_compaction(w)):  # a compaction changes no record
                    self._reads[w.seq] = {p for sl in (*before, *after) for p in sl.objects()}
        return self._reads.get(e.seq, set())

    def _earliest(self, active: set[str], cleaned: set[str], cdc: bool) -> str:
        """The earliest begin (exclusive) from which every later write is readable."""
        writes = self.st.ordered_writes()
        k = len(writes)
        while k > 0 and self._readable(writes[k - 1], active, cleaned, cdc):
            k -= 1
        return writes[k - 1].time if k > 0 else ""


def incremental_slices(r: ChangeRange, full_scan: bool = False) -> list[FileSlice]:
    """The file slices an incremental read takes, by base path: as of `end`, the latest
    slice of every file group a write of the range added a base file or log blocks to (a
    compaction changes no record: it adds none), each read merged with its logs (a
    copy-on-write slice is its base file alone); `full_scan`: every latest slice."""
    slices = FileGroupFold.of(r.writes).latest_slices()
    if full_scan:
        picked = list(slices.values())
    else:
        touched = {
            g
            for e in r.in_range
            if not is_compaction(e)
            for g in (*(f.group for f in e.added), *(lf.file_group for lf in logs_of(e.metadata)))
        }
        picked = [slices[g] for g in touched if g in slices]
        r.check_readable(cdc=False, reads=[p for sl in picked for p in sl.objects()])
    return sorted(picked, key=lambda sl: sl.base.path)


def written_in(data: pa.Table, times: Sequence[str]) -> pa.Table:
    """The rows of `data` whose last write is one of the commits `times`."""
    if data.num_rows == 0 or COMMIT_TIME_COL not in data.column_names:
        return data.slice(0, 0)
    return data.filter(
        pc.is_in(data.column(COMMIT_TIME_COL), value_set=pa.array(times, pa.string()))
    )


def incremental(
    table: KeyedTable,
    props: KeyedProperties,
    begin: str | None,
    end: str | None = None,
    *,
    full_scan: bool = False,
) -> pa.Table:
    """The incremental read of either table type: the merged latest slices of the file
    groups the range touched (`incremental_slices`), filtered to the rows the range's
    commits wrote."""
    r = ChangeRange(table, begin, end)
    picked = incremental_slices(r, full_scan)
    with r.reading(cdc=False):
        data = read_slices(
            table.store, picked, r.schema, key_col=integer_key_column(props, r.schema)
        )
    if data is None:
        data = r.schema.empty_table() if r.schema is not None else pa.table({})
    return written_in(data, sorted({e.time for e in r.in_range}))


def record_identity(f: DataFile, key: str, props: KeyedProperties) -> str:
    return f"{f.partition}\x00{key}" if props.key_scope == KeyScope.PARTITION else key


def rows_by_identity(
    rows: pa.Table, base: DataFile, props: KeyedProperties
) -> dict[str, dict[str, Any]]:
    """A file slice's rows (`base`: its base file) by record identity."""
    return {record_identity(base, str(row[RECORD_KEY_COL]), props): row for row in rows.to_pylist()}


def commit_changes(
    instant: str, before: Mapping[str, dict[str, Any]], after: Mapping[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The CDC rows of one commit from its touched file groups' rows (by record identity)
    just before and just after it, sorted by record key and op: a row the commit wrote is
    an insert or an update, a row gone a delete; a row copied unchanged into the new slice
    is no change."""
    changes: list[dict[str, Any]] = []
    for ident, row in after.items():
        if row.get(COMMIT_TIME_COL) != instant:
            continue  # copied unchanged into the new slice
        old = before.get(ident)
        changes.append(change_row(UPDATE if old is not None else INSERT, instant, row, old, row))
    for ident, old in before.items():
        if ident not in after:
            changes.append(change_row(DELETE, instant, old, old, None))
    return sorted(changes, key=lambda c: (c["record_key"], c["op"]))


def cdc_schema(schema: pa.Schema | None) -> pa.Schema:
    image = pa.struct(list(schema) if schema is not None else [])
    return pa.schema(
        [
            ("op", pa.string()),
            ("instant", pa.string()),
            ("record_key", pa.string()),
            ("before", image),
            ("after", image),
        ]
    )


def cdc(
    table: KeyedTable, props: KeyedProperties, begin: str | None, end: str | None = None
) -> pa.Table:
    """The CDC read of either table type: each write's changes are the difference of its
    touched file groups' slices just before and just after it, each read merged with its
    logs (a copy-on-write slice is its base file alone). A compaction changes no record
    (rows keep their commit times): it yields no row."""
    r = ChangeRange(table, begin, end)
    r.check_readable(cdc=True)
    key_col = integer_key_column(props, r.schema)

    def by_id(slices: Sequence[FileSlice]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for sl in slices:
            data = read_slices(table.store, [sl], r.schema, key_col=key_col)
            if data is not None:
                out.update(rows_by_identity(data, sl.base, props))
        return out

    out: list[dict[str, Any]] = []
    with r.reading(cdc=True):
        for e, before, after in walk(r.writes, r.begin_seq):
            if not is_compaction(e):
                out += commit_changes(e.time, by_id(before), by_id(after))
    return pa.Table.from_pylist(out, schema=cdc_schema(r.schema))


def change_row(
    op: str,
    instant: str,
    row: dict[str, Any],
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "op": op,
        "instant": instant,
        "record_key": row[RECORD_KEY_COL],
        "before": before,
        "after": after,
    }
