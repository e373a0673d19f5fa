"""The repairs of `check_table(..., repair=True)` (timeline/check.py): only what the table
itself records is rewritten (docs/tables.md, "Checking a table"); the rest is refused with
the reason."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

import pyarrow as pa

from storage import IntegrityError, NotFound, seal_blob, verify

from .check_report import (
    CheckProblem,
    CheckRepair,
    ProblemKind,
    cut,
)
from .keyed.index.bloom import BloomFilter
from .keyed.index.indexing import build_index
from .keyed.index.ranges import write_stats_by_path
from .keyed.keys import RECORD_KEY_COL
from .keyed.properties import KeyedProperties, create_properties
from .parquet_io import read_files
from .snapshot import TableState
from .table import Table

_LOST = "restore it from a backup or roll back the instant that wrote it"
#: Why a problem that cannot be repaired is refused.
_REFUSALS = MappingProxyType(
    {
        ProblemKind.MISSING: f"the file's bytes exist nowhere else; {_LOST}",
        ProblemKind.DAMAGED: f"the file's bytes cannot be recomputed; {_LOST}",
        ProblemKind.DUPLICATE_KEY: "which copy of the key is current cannot be told "
        "without guessing",
        ProblemKind.TIMELINE: "the timeline itself is unreadable",
    }
)


def repair_all(
    table: Table,
    problems: Sequence[CheckProblem],
    creation: KeyedProperties | None,
    st: TableState | None,
) -> list[CheckRepair]:
    """One repair (done or refused) per problem; the record index is rebuilt once."""
    out: list[CheckRepair] = []
    index_done: CheckRepair | None = None
    for p in problems:
        if p.kind == ProblemKind.RECORD_INDEX:
            if index_done is None:
                index_done = _rebuild_index(table, p)
                out.append(index_done)
            else:
                out.append(CheckRepair(p, index_done.done, index_done.message))
        else:
            out.append(_repair_one(table, p, creation, st))
    return out


def _repair_one(
    table: Table, p: CheckProblem, creation: KeyedProperties | None, st: TableState | None
) -> CheckRepair:
    if p.kind == ProblemKind.PHANTOM_PENDING:
        gone = [i for i in table.tl.states.of_time(p.subject) if i.is_pending]
        table.tl.states.delete(sorted(gone, key=lambda i: -i.state.rank))
        names = ", ".join(f"{i.action}.{i.state.value}" for i in gone) or "nothing left"
        return CheckRepair(p, True, f"deleted the pending states of {p.subject} ({names})")
    if p.kind == ProblemKind.MISSING_PROPERTIES:
        if creation is None:
            return CheckRepair(p, False, "no creation commit records the properties: not guessed")
        create_properties(table.store, creation)
        return CheckRepair(
            p, True, f"wrote {p.subject} from the creation commit ({creation.describe()})"
        )
    if p.kind == ProblemKind.BLOOM_SIDECAR and st is not None:
        return _rebuild_bloom(table, st, p)
    why = _REFUSALS.get(p.kind, "no repair without guessing")
    return CheckRepair(p, False, f"{p.subject}: {why}")


def _rebuild_index(table: Table, p: CheckProblem) -> CheckRepair:
    try:
        done = build_index(table, from_files=True)
    except Exception as exc:  # reported on its line; the other repairs still run
        return CheckRepair(p, False, f"record index rebuild failed: {cut(exc)}")
    return CheckRepair(p, True, f"rebuilt the record index from the files ({done.time})")


def _rebuild_bloom(table: Table, st: TableState, p: CheckProblem) -> CheckRepair:
    """Rebuild a sidecar from its data file's keys, written back only when the bytes match
    the checksum its commit recorded (the same filter), else refused."""
    stats = write_stats_by_path(st)
    store = table.store
    for f in st.snapshot().files:
        s = stats.get(f.path, {})
        if not s.get("bloom_path") or store.url(str(s["bloom_path"])) != p.subject:
            continue
        try:
            rows = read_files(store, [f], [RECORD_KEY_COL])
        except (IntegrityError, NotFound) as exc:
            return CheckRepair(p, False, f"its data file {f.path} is unreadable: {cut(exc)}")
        keys = rows.column(RECORD_KEY_COL) if rows is not None else pa.array([], pa.string())
        bf = BloomFilter.build_sized(
            keys, int(s["bloom_num_bits"]), int(s["bloom_num_hashes"]), str(s.get("bloom_hash"))
        )
        body = seal_blob(bf.bits)
        try:
            verify(body, str(s.get("bloom_checksum", "")), p.subject)
        except IntegrityError:
            return CheckRepair(
                p,
                False,
                "the rebuilt filter differs from the one its commit recorded: not "
                "written (writes read the file instead of the filter)",
            )
        store.delete(str(s["bloom_path"]))
        store.put(str(s["bloom_path"]), body)
        return CheckRepair(p, True, f"rebuilt {p.subject} from {f.path}")
    return CheckRepair(p, False, "no live data file names this sidecar")


__all__ = ["repair_all"]
