"""What a keyed batch does to the records the table holds, decided over whole arrays and
shared by the copy-on-write and merge-on-read writers: which located records an upsert
replaces in place or moves (a global key whose partition changed: deleted where it was,
inserted where it goes), which a delete removes (Hudi's rule, by the merge mode), which
rows a filter selects, and which records are new."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ...errors import DuplicateKeys
from ..keys import RECORD_KEY_COL
from ..merge import wins
from .planner import FAIL, Batch, Planner, by_partition
from .planning import Filter, filter_matches


@dataclass(frozen=True)
class Replaced:
    """Stored records a write replaces or removes (arrays aligned, one entry a record)."""

    file: np.ndarray  # index into the planner's files
    row: np.ndarray  # row in that file's rows
    keys: pa.Array  # record keys
    #: batch rows written in place of the stored record (-1: none, the record is removed)
    new: np.ndarray
    #: the ordering value a removal carries (the delete's, else the stored one); None: none
    ordering: pa.Array | None

    def by_file(self) -> Iterator[tuple[int, np.ndarray]]:
        """(file index, positions of its entries), file by file."""
        if not len(self.file):
            return
        order = np.argsort(self.file, kind="stable")
        files = self.file[order]
        cuts = np.flatnonzero(np.diff(files)) + 1
        for start, sel in zip(np.r_[0, cuts], np.split(order, cuts), strict=True):
            yield int(files[start]), sel


@dataclass(frozen=True)
class Upserts:
    """What an upsert (or insert) batch does: stored records it replaces, and the batch rows
    to insert as new records (new keys, and moved ones in their new partition) by
    partition."""

    replaced: Replaced
    inserts: dict[str, np.ndarray]


def _stored(found: pa.Table) -> pa.Array:
    if "stored" in found.column_names:
        return found.column("stored").combine_chunks()
    return pa.nulls(found.num_rows)


def decide_upserts(
    plan: Planner,
    batch: Batch,
    operation: str,
    on_duplicate: str,
    probes: list[tuple[int, np.ndarray]] | None = None,
) -> Upserts:
    """`probes`: the batch's candidates, if the caller has them (Planner.locate)."""
    found = plan.locate(batch, probes)
    n = len(batch.keys)
    pos = found.column("pos").to_numpy()
    is_new = np.ones(n, dtype=bool)
    is_new[pos] = False
    won = np.zeros(len(pos), dtype=bool)
    same = np.ones(len(pos), dtype=bool)
    if operation == "insert":
        if len(pos) and on_duplicate == FAIL:
            dupes = sorted(batch.keys.take(pa.array(pos)).to_pylist())
            raise DuplicateKeys(
                f"insert into {plan.table.uri}: {len(dupes)} key(s) already in the table, "
                f"e.g. {', '.join(dupes[:5])} (upsert them, or insert with "
                "on_duplicate='drop')",
                dupes,
            )
    elif len(pos):
        incoming = batch.ordering.take(pa.array(pos)) if batch.ordering is not None else None
        won = wins(_stored(found), incoming, plan.props, True)
        file_part = np.array([f.partition for f in plan.files], dtype=object)
        batch_part = np.asarray(batch.partitions.to_numpy(zero_copy_only=False), dtype=object)
        same = file_part[found.column("file").to_numpy()] == batch_part[pos]
    moved = np.zeros(n, dtype=bool)
    moved[pos[won & ~same]] = True
    sel = np.flatnonzero(won)
    wpos = pos[sel]
    replaced = Replaced(
        file=found.column("file").to_numpy()[sel],
        row=found.column("row").to_numpy()[sel],
        keys=batch.keys.take(pa.array(wpos, pa.int64())),
        new=np.where(same[sel], wpos, -1),
        ordering=batch.ordering.take(pa.array(wpos, pa.int64()))
        if batch.ordering is not None
        else None,
    )
    todo = np.flatnonzero(is_new | moved)
    parts = batch.partitions
    if len(todo) < len(parts):  # (a load's every record is new: nothing to take)
        parts = parts.take(pa.array(todo, pa.int64()))
    return Upserts(replaced, by_partition(parts, todo))


def decide_deletes(
    plan: Planner, dbatch: Batch, probes: list[tuple[int, np.ndarray]] | None = None
) -> Replaced:
    """The stored records the deletes win over (`probes`: as for `decide_upserts`)."""
    found = plan.locate(dbatch, probes)
    pos = found.column("pos").to_numpy()
    has = dbatch.ordering is not None
    stored = _stored(found)
    incoming = dbatch.ordering.take(pa.array(pos)) if dbatch.ordering is not None else None
    won = wins(stored, incoming, plan.props, has)
    sel = np.flatnonzero(won)
    ordering = incoming if incoming is not None else stored
    return Replaced(
        file=found.column("file").to_numpy()[sel],
        row=found.column("row").to_numpy()[sel],
        keys=dbatch.keys.take(pa.array(pos[sel], pa.int64())),
        new=np.full(len(sel), -1, dtype=np.int64),
        ordering=ordering.take(pa.array(sel, pa.int64())) if len(ordering) else None,
    )


def decide_filter(plan: Planner, where: Filter) -> Replaced:
    """The stored records `where` selects (every file read whole, one at a time)."""
    order = plan.props.ordering_field
    files, rows, keys, values = [], [], [], []
    for k, f in enumerate(plan.files):
        data = plan.rows_of(f)
        plan.files_read += 1
        hits = filter_matches(data, where) if data.num_rows else []
        if not hits:
            continue
        idx = pa.array(hits, pa.int64())
        files.append(np.full(len(hits), k, dtype=np.int64))
        rows.append(np.asarray(hits, dtype=np.int64))
        keys.append(data.column(RECORD_KEY_COL).take(idx).combine_chunks().cast(pa.string()))
        if order and order in data.column_names:
            values.append(data.column(order).take(idx).combine_chunks())
    n = sum(len(r) for r in rows)
    ordering = None
    if values and len(values) == len(rows):
        ordering = pa.concat_arrays([v.cast(values[0].type) for v in values])
    return Replaced(
        file=np.concatenate(files) if files else np.zeros(0, dtype=np.int64),
        row=np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
        keys=pa.concat_arrays(keys) if keys else pa.array([], pa.string()),
        new=np.full(n, -1, dtype=np.int64),
        ordering=ordering,
    )
