"""What a keyed batch changes, decided over whole arrays: the located records the batch
updates, moves (a global key whose partition changed) or deletes, by the merge mode, marked
on their file groups; new records collected by partition for placement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import DuplicateKeys
from .merge import wins

if TYPE_CHECKING:
    from .write import Batch, Planner

FAIL = "fail"


def _by_file(found: pa.Table, mask: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(file index, positions in `found` of its rows) for the rows `mask` selects, by file."""
    sel = np.flatnonzero(mask)
    if not len(sel):
        return []
    files = found.column("file").to_numpy()[sel]
    order = np.argsort(files, kind="stable")
    sel, files = sel[order], files[order]
    cuts = np.flatnonzero(np.diff(files)) + 1
    starts = np.r_[0, cuts]
    return [(int(files[s]), c) for s, c in zip(starts, np.split(sel, cuts), strict=True)]


def apply_upserts(
    plan: Planner, batch: Batch, operation: str, on_duplicate: str, pending: dict[str, list[int]]
) -> None:
    """Mark the rows the batch updates or moves, and collect new records by partition."""
    found = plan.locate(batch)
    n = len(batch.ids)
    pos = found.column("pos").to_numpy()
    is_new = np.ones(n, dtype=bool)
    is_new[pos] = False
    moved = np.zeros(n, dtype=bool)
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
        stored = (
            found.column("stored").combine_chunks()
            if "stored" in found.column_names
            else pa.nulls(len(pos))
        )
        incoming = batch.ordering.take(pa.array(pos)) if batch.ordering is not None else None
        won = wins(stored, incoming, plan.props, True)
        file_part = np.array([f.partition for f in plan.files], dtype=object)
        batch_part = np.asarray(batch.partitions.to_numpy(zero_copy_only=False), dtype=object)
        rows = found.column("row").to_numpy()
        same = file_part[found.column("file").to_numpy()] == batch_part[pos]
        for k, sel in _by_file(found, won):
            g = plan.group_of(plan.files[k])
            g.drop.update(rows[sel].tolist())
            stay = sel[same[sel]]
            g.new.extend(pos[stay].tolist())
            g.updates += len(stay)
            g.deletes += len(sel) - len(stay)  # a global key moved partition: deleted here
        moved[pos[won & ~same]] = True  # ... and inserted into its new partition
    todo = np.flatnonzero(is_new | moved)
    parts = batch.partitions.take(pa.array(todo)).to_pylist()
    for i, p in zip(todo.tolist(), parts, strict=True):
        pending.setdefault(p, []).append(i)


def apply_deletes(plan: Planner, dbatch: Batch) -> tuple[pa.Array, pa.Array]:
    """Mark the stored rows the deletes win over; returns their (keys, partitions)."""
    found = plan.locate(dbatch)
    if found.num_rows == 0:
        return pa.array([], pa.string()), pa.array([], pa.string())
    pos = found.column("pos").to_numpy()
    has = dbatch.ordering is not None
    stored = (
        found.column("stored").combine_chunks()
        if "stored" in found.column_names
        else pa.nulls(len(pos))
    )
    incoming = dbatch.ordering.take(pa.array(pos)) if dbatch.ordering is not None else None
    won = wins(stored, incoming, plan.props, has)
    rows = found.column("row").to_numpy()
    for k, sel in _by_file(found, won):
        g = plan.group_of(plan.files[k])
        fresh = set(rows[sel].tolist()) - g.drop
        g.drop |= fresh
        g.deletes += len(fresh)
    idx = pa.array(np.flatnonzero(won))
    keys = dbatch.keys.take(pa.array(pos)).take(idx)
    file_part = [plan.files[k].partition for k in found.column("file").to_numpy()[won].tolist()]
    return keys, pa.array(file_part, pa.string())
