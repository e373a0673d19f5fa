"""`check_table`: whether a table holds what its timeline says it holds (Delta's FSCK,
hudi-cli's validate and repair commands), and the repairs that need no guess.

What is checked (docs/tables.md, "Checking a table"):

- **files**: every file a reader may still need exists and matches the checksum its commit
  recorded: the latest snapshot's (on a merge-on-read table its slices' bases and logs), the
  snapshot of every completed write a time travel may still reach (not before the cleaner's
  retained position, or savepointed), and the files of pending compaction and clustering
  plans;
- **pending instants**: no instant listed as pending has completed (a completion in the
  active timeline, the commit log or the archive): a "phantom" pending compaction keeps its
  file groups out of every later plan;
- **keyed properties**: a table whose commits hold the record key column has its properties
  object;
- **keys**: no record key is held by two file groups of the latest snapshot;
- **record-level index** (if built and current): its shards and deltas are readable and name
  the file group each key of the tracked groups is in;
- **bloom filter sidecars** of the latest snapshot's files are present and intact.

`repair=True` fixes what can be fixed from what the table itself records: phantom pending
states are deleted (as archival would have), the record index is rebuilt from the files, a
bloom sidecar is rebuilt when the rebuilt bytes match the checksum its commit recorded, the
properties object is rewritten from the creation commit. Missing or damaged data, and keys
held twice, are refused with the reason: which copy is right cannot be told.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import IntegrityError, NotFound, ObjectStore, open_blob, verify

from .check_repair import repair_all
from .check_report import (
    SHOWN_KEYS,
    CheckProblem,
    CheckReport,
    ProblemKind,
    cut,
)
from .errors import MissingTableObject
from .file_groups import COMPACTION_DETAIL, FileSlice
from .file_groups.log_files import LogFile
from .instant import COMMIT, COMPACTION, REPLACE_COMMIT, RESTORE, ROLLBACK, parse_name
from .keyed.index.ranges import write_stats_by_path
from .keyed.index.record_index import INDEX_SCHEMA, apply_delta, index_view, read_shard
from .keyed.keys import RECORD_KEY_COL, integer_key_column
from .keyed.log.block import read_log
from .keyed.policies import KeyScope
from .keyed.properties import KeyedProperties
from .keyed.read.slices import read_slice
from .loader import load_active
from .metadata import DataFile
from .parquet_io import read_files, read_verified
from .recovery import read_plan
from .snapshot import TableState
from .table import Table

log = logging.getLogger(__name__)


@dataclass
class _Found:
    problems: list[CheckProblem] = field(default_factory=list)
    files: int = 0
    snapshots: int = 0

    def add(self, kind: ProblemKind, subject: str, message: str) -> None:
        self.problems.append(CheckProblem(kind, subject, message))


def check_table(target: Table | ObjectStore, *, repair: bool = False) -> CheckReport:
    """Check a table (a `Table`, or the store it lives in); `repair`: fix what can be fixed
    without guessing, then report what was found and what each repair did."""
    table = target if isinstance(target, Table) else Table.open(target)
    found = _Found()
    props, creation = _properties(table, found)
    try:
        st = table.state()
    except (IntegrityError, NotFound) as exc:
        found.add(
            ProblemKind.TIMELINE,
            getattr(exc, "uri", "") or table.uri,
            f"timeline unreadable: {exc}",
        )
        return _report(table, found, creation, None, repair)
    _phantoms(table, st, found)
    _files(table, st, found)
    if props is not None:
        _keys(table, st, props, found)
        _bloom_sidecars(table, st, found)
    return _report(table, found, creation, st, repair)


# -- properties ---------------------------------------------------------------------------
def _properties(
    table: Table, found: _Found
) -> tuple[KeyedProperties | None, KeyedProperties | None]:
    """The table's properties (None: unkeyed), and those its creation commit recorded when
    the properties object is missing (what a repair writes back)."""
    try:
        return table.properties, None
    except MissingTableObject as exc:
        found.add(
            ProblemKind.MISSING_PROPERTIES,
            exc.uri,
            f"{exc.uri} is missing (the table's commits hold the record key column)",
        )
    except (IntegrityError, NotFound) as exc:
        found.add(
            ProblemKind.MISSING_PROPERTIES, getattr(exc, "uri", ""), f"properties unreadable: {exc}"
        )
        return None, None
    creation = None
    try:
        for e in table.state().entries:
            keyed = e.metadata.get("keyed")
            if isinstance(keyed, dict) and isinstance(keyed.get("properties"), dict):
                creation = KeyedProperties.from_json(keyed["properties"])
                break
    except (IntegrityError, NotFound):
        pass
    return creation, creation


# -- pending instants ---------------------------------------------------------------------
def _phantoms(table: Table, st: TableState, found: _Found) -> None:
    undone = {
        parse_name(n).time
        for e in st.entries
        if e.action in (ROLLBACK, RESTORE)
        for n in e.rolled_back
    }
    completed = {(e.time, e.action): e for e in st.entries if e.time not in undone}
    timeline = table.timeline(refresh=False)
    active = timeline.completed()
    for i in timeline.pending():
        # a compaction completes as a commit of its instant time
        e = completed.get((i.time, COMMIT if i.action == COMPACTION else i.action))
        if e is None:
            continue
        where = "in the active timeline" if active.get(i.time) is not None else "archived"
        found.add(
            ProblemKind.PHANTOM_PENDING,
            i.time,
            f"{i.action} {i.time} is listed as pending ({i.state.value}) but completed as "
            f"{e.action} at log position {e.seq} ({where}); later plans leave its file "
            "groups out",
        )
    # Plan objects an older archiver left beside an archived completion: no longer read as
    # pending, but still objects that archival should have deleted with their commit.
    source = table.instants.archive
    archived = source(table.store) if source is not None else None
    for i in load_active(table.tl, table.instants.load(), archived).superseded:
        found.add(
            ProblemKind.PHANTOM_PENDING,
            i.time,
            f"{i.action}.{i.state.value} of {i.time} is left in the active timeline although "
            "its completion is archived (an older archiver's leftover; not read as pending)",
        )


# -- files --------------------------------------------------------------------------------
@dataclass
class _Needed:
    """The files to verify, each with the first reader that needs it."""

    data: dict[str, tuple[DataFile, str]] = field(default_factory=dict)
    logs: dict[str, tuple[LogFile, str]] = field(default_factory=dict)

    def add_files(self, files: Iterable[DataFile], who: str) -> None:
        for f in files:
            self.data.setdefault(f.path, (f, who))

    def add_slices(self, slices: Iterable[FileSlice], who: str) -> None:
        for sl in slices:
            self.data.setdefault(sl.base.path, (sl.base, who))
            for _, lf in sl.logs:
                self.logs.setdefault(lf.ref, (lf, who))


def _readable_seqs(st: TableState) -> list[tuple[int, str]]:
    """(log position, who reads it): every write a time travel may still reach, newest
    first (the latest snapshot first)."""
    floor = st.cleaned_before_seq()
    saved = {e.seq for e in st.writes.values() if e.time in st.savepoints}
    out = [
        (e.seq, f"the snapshot of {e.time}")
        for e in reversed(st.ordered_writes())
        if e.seq >= floor or e.seq in saved
    ]
    if out:
        out[0] = (out[0][0], "the latest snapshot")
    return out


def _needed(table: Table, st: TableState, found: _Found) -> _Needed:
    need = _Needed()
    mor = st.is_merge_on_read()
    for seq, who in _readable_seqs(st):
        found.snapshots += 1
        if mor:
            need.add_slices(st.latest_slices(seq).values(), who)
        else:
            need.add_files(st.snapshot(seq).files, who)
    files, logs = st.all_files(), st.live_logs()
    for i in table.timeline(refresh=False).pending():
        if i.action not in (COMPACTION, REPLACE_COMMIT):
            continue
        try:
            plan = read_plan(table, i)
        except (IntegrityError, NotFound):
            continue  # a plan without its requested object: nothing to read for it
        who = f"the pending {i.action} {i.time}"
        detail = plan.get(COMPACTION_DETAIL)
        for op in detail.get("operations", ()) if isinstance(detail, dict) else ():
            base = files.get(str(op.get("base_path")))
            if base is not None:
                need.data.setdefault(base.path, (base, who))
            for ref in op.get("log_paths", ()):
                if ref in logs:
                    need.logs.setdefault(ref, (logs[ref][1], who))
        groups = plan.get("groups")
        for group in groups if isinstance(groups, list) else ():
            need.add_files((files[p] for p in group if p in files), who)
    return need


def _files(table: Table, st: TableState, found: _Found) -> None:
    need = _needed(table, st, found)
    store = table.store
    for path, (f, who) in sorted(need.data.items()):
        found.files += 1
        _verify(found, store, path, who, lambda f=f: read_verified(store, f))
    for ref, (lf, who) in sorted(need.logs.items()):
        found.files += 1
        _verify(found, store, lf.path, who, lambda lf=lf: read_log(store, lf), ref)


def _verify(
    found: _Found, store: ObjectStore, path: str, who: str, read: Any, name: str = ""
) -> None:
    where = store.url(name or path)
    try:
        read()
    except (NotFound, MissingTableObject):
        found.add(ProblemKind.MISSING, store.url(path), f"{where} is missing ({who} reads it)")
    except IntegrityError as exc:
        found.add(
            ProblemKind.DAMAGED, store.url(path), f"{where} is damaged ({who} reads it): {cut(exc)}"
        )


# -- keys and the record index ------------------------------------------------------------
def _group_keys(table: Table, st: TableState, props: KeyedProperties) -> dict[str, pa.Table]:
    """file group -> (key, partition) of its latest slice's records; groups whose files
    cannot be read are left out (their files are reported already)."""
    schema = st.schema()
    out: dict[str, pa.Table] = {}
    if st.is_merge_on_read():
        key_col = integer_key_column(props, schema)
        for g, sl in st.latest_slices().items():
            try:
                rows = read_slice(table.store, sl, schema, None, parallelism=1, key_col=key_col)
            except (IntegrityError, NotFound):
                continue
            out[g] = _keys_of(rows, sl.partition)
        return out
    for f in st.snapshot().files:
        try:
            rows = read_files(table.store, [f], [RECORD_KEY_COL])
        except (IntegrityError, NotFound):
            continue
        out[f.group] = _keys_of(rows, f.partition)
    return out


def _keys_of(rows: pa.Table | None, partition: str) -> pa.Table:
    if rows is None or RECORD_KEY_COL not in rows.column_names:
        return pa.table({"key": pa.array([], pa.string()), "partition": pa.array([], pa.string())})
    keys = rows.column(RECORD_KEY_COL).cast(pa.string())
    return pa.table({"key": keys, "partition": pa.array([partition] * len(keys), pa.string())})


def _identity(props: KeyedProperties, key: str, partition: str) -> str:
    return key if props.key_scope == KeyScope.GLOBAL else f"{partition}/{key}"


def _keys(table: Table, st: TableState, props: KeyedProperties, found: _Found) -> None:
    groups = _group_keys(table, st, props)
    holder: dict[str, str] = {}
    twice: dict[str, set[str]] = {}
    for g in sorted(groups):
        t = groups[g]
        for k, p in zip(
            t.column("key").to_pylist(), t.column("partition").to_pylist(), strict=True
        ):
            ident = _identity(props, k, p)
            first = holder.setdefault(ident, g)
            if first != g:
                twice.setdefault(ident, {first}).add(g)
    for ident in sorted(twice)[:SHOWN_KEYS]:
        found.add(
            ProblemKind.DUPLICATE_KEY,
            ident,
            f"key {ident!r} is held by file groups {', '.join(sorted(twice[ident]))} of the "
            "latest snapshot",
        )
    if len(twice) > SHOWN_KEYS:
        found.add(
            ProblemKind.DUPLICATE_KEY, "", f"{len(twice) - SHOWN_KEYS} more keys are held twice"
        )
    _record_index(table, st, props, groups, found)


def _record_index(
    table: Table,
    st: TableState,
    props: KeyedProperties,
    groups: dict[str, pa.Table],
    found: _Found,
) -> None:
    view = index_view(st)
    if view is None:
        return
    store = table.store
    ref = None
    try:
        parts = []
        for ref in view.shards:
            parts.append(read_shard(store, ref)[0])
        mapping = pa.concat_tables(parts) if parts else INDEX_SCHEMA.empty_table()
        for ref in view.deltas:
            mapping = apply_delta(mapping, read_shard(store, ref)[0], props)
    except (IntegrityError, NotFound) as exc:
        what = "missing" if isinstance(exc, NotFound) else "damaged"
        subject = store.url(ref.path) if ref is not None else table.uri
        found.add(
            ProblemKind.RECORD_INDEX,
            subject,
            f"record index {view.instant}: {subject} is {what} (writes fall back to key ranges "
            "and bloom filters until it is rebuilt)",
        )
        return
    tracked = [g for g in groups if g not in view.untracked]
    said: dict[str, str] = {}
    keep = pa.array(tracked, pa.string())
    within = mapping.filter(pc.is_in(mapping.column("file_group"), value_set=keep))
    for k, p, g in zip(
        within.column("key").to_pylist(),
        within.column("partition").to_pylist(),
        within.column("file_group").to_pylist(),
        strict=True,
    ):
        said[_identity(props, k, p)] = g
    wrong: list[str] = []
    for g in tracked:
        t = groups[g]
        for k, p in zip(
            t.column("key").to_pylist(), t.column("partition").to_pylist(), strict=True
        ):
            ident = _identity(props, k, p)
            if said.pop(ident, None) != g:
                wrong.append(ident)
    wrong.extend(said)  # named in a tracked group that does not hold it
    if wrong:
        shown = ", ".join(repr(k) for k in sorted(wrong)[:SHOWN_KEYS])
        found.add(
            ProblemKind.RECORD_INDEX,
            view.instant,
            f"record index {view.instant} disagrees with the files for {len(wrong)} keys "
            f"(e.g. {shown})",
        )


# -- bloom sidecars -----------------------------------------------------------------------
def _bloom_sidecars(table: Table, st: TableState, found: _Found) -> None:
    stats = write_stats_by_path(st)
    store = table.store
    for f in st.snapshot().files:
        s = stats.get(f.path, {})
        path = s.get("bloom_path")
        if not path or s.get("bloom"):
            continue
        where = store.url(str(path))
        try:
            data = store.get(str(path))
            verify(data, str(s.get("bloom_checksum", "")), where)
            open_blob(data, where)
        except NotFound:
            found.add(
                ProblemKind.BLOOM_SIDECAR, where, f"bloom filter {where} of {f.path} is missing"
            )
        except IntegrityError as exc:
            found.add(
                ProblemKind.BLOOM_SIDECAR, where, f"bloom filter {where} is damaged: {cut(exc)}"
            )


# -- report -------------------------------------------------------------------------------
def _report(
    table: Table,
    found: _Found,
    creation: KeyedProperties | None,
    st: TableState | None,
    repair: bool,
) -> CheckReport:
    repairs = repair_all(table, found.problems, creation, st) if repair else []
    for p in found.problems:
        log.info("table check %s: %s", table.uri, p)
    return CheckReport(
        table.uri, tuple(found.problems), tuple(repairs), found.files, found.snapshots
    )


__all__ = ["check_table"]
