"""Routing a merge-on-read write's records to file groups without reading slices.

The index (base files' and logs' key ranges and bloom filters, keyed/index/merge_on_read.py) names
the file
groups that may hold each incoming key:

- exactly one group (in the record's partition): the record goes into that group's log as
  it is, update or insert alike; the reader's merge decides by the merge mode (keyed/read/merge.py).
  Nothing is read: the index is complete (every group holding the key is a candidate), so no
  other group can hold the key, and if this one does not, the record is an insert that lives
  in the log, where the log's own range and bloom filter let the index find it again;
- no group: a new key, into new base files (as copy-on-write places inserts);
- several groups (a bloom false positive, overlapping key ranges), or one group in another
  partition (a global key that may move): only those groups are read to find where the key
  is, and the writer decides as copy-on-write does (keyed/write/decide.py). Sending such a key to
  one
  chosen candidate unread would be wrong: if another candidate holds it, the table would then
  hold the key twice, in two groups the reader merges separately.

An `insert` (which fails or drops keys already stored) reads every candidate, since it must
know; a delete by filter reads every slice, as it must evaluate the filter.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .decide import Replaced, Upserts, decide_deletes, decide_upserts
from .planner import Batch, Planner


def _pick(batch: Batch, pos: np.ndarray) -> Batch:
    idx = pa.array(pos, pa.int64())
    return Batch(
        batch.rows.take(idx),
        batch.keys.take(idx),
        batch.partitions.take(idx),
        batch.ordering.take(idx) if batch.ordering is not None else None,
    )


Probes = list[tuple[int, np.ndarray]]


def _single(plan: Planner, batch: Batch) -> tuple[np.ndarray, np.ndarray, Probes]:
    """Per batch record: how many file groups may hold it, and the one file (index into
    `plan.files`) when there is exactly one (-1 otherwise); and the index's answer."""
    n = len(batch.keys)
    count = np.zeros(n, dtype=np.int64)
    only = np.full(n, -1, dtype=np.int64)
    probes = plan.candidates(batch)
    for k, pos in probes:
        count[pos] += 1
        only[pos] = k
    only[count != 1] = -1
    return count, only, probes


def _probes_of(probes: Probes, n: int, pos: np.ndarray) -> Probes:
    """`probes` of a batch of `n` records, for the batch of its records `pos` (the index
    answers each key alone, so asking again about them would give the same)."""
    at = np.full(n, -1, dtype=np.int64)
    at[pos] = np.arange(len(pos), dtype=np.int64)
    out = []
    for k, p in probes:
        sub = at[p]
        sub = sub[sub >= 0]
        if len(sub):
            out.append((k, sub))
    return out


def _concat(a: Replaced, b: Replaced) -> Replaced:
    ordering = None
    if a.ordering is not None and b.ordering is not None:
        ordering = pa.concat_arrays([a.ordering, b.ordering.cast(a.ordering.type)])
    return Replaced(
        np.concatenate([a.file, b.file]),
        np.concatenate([a.row, b.row]),
        pa.concat_arrays([a.keys, b.keys.cast(a.keys.type)]),
        np.concatenate([a.new, b.new]),
        ordering,
    )


def _shifted(r: Replaced, pos: np.ndarray) -> Replaced:
    """`r` decided on a batch of the records `pos`: its batch rows as the whole batch's."""
    return Replaced(
        r.file, r.row, r.keys, np.where(r.new >= 0, pos[np.maximum(r.new, 0)], -1), r.ordering
    )


def route_upserts(plan: Planner, batch: Batch, operation: str, on_duplicate: str) -> Upserts:
    """What an upsert does, reading only the candidates of keys the index cannot place."""
    if operation == "insert":
        return decide_upserts(plan, batch, operation, on_duplicate)
    count, only, probes = _single(plan, batch)
    file_part = np.array([f.partition for f in plan.files] + [""], dtype=object)
    batch_part = np.asarray(batch.partitions.to_numpy(zero_copy_only=False), dtype=object)
    direct = (count == 1) & (file_part[only] == batch_part)
    fresh = count == 0
    unsure = np.flatnonzero(~direct & ~fresh)
    dpos = np.flatnonzero(direct)
    replaced = Replaced(
        file=only[dpos],
        row=np.full(len(dpos), -1, dtype=np.int64),  # not read: a log block needs no row
        keys=batch.keys.take(pa.array(dpos, pa.int64())),
        new=dpos,
        ordering=batch.ordering.take(pa.array(dpos, pa.int64()))
        if batch.ordering is not None
        else None,
    )
    inserts: dict[str, list[np.ndarray]] = {}
    fpos = np.flatnonzero(fresh)
    for p in np.unique(batch_part[fpos]) if len(fpos) else ():
        inserts.setdefault(str(p), []).append(fpos[batch_part[fpos] == p])
    if len(unsure):
        sub = decide_upserts(
            plan,
            _pick(batch, unsure),
            operation,
            on_duplicate,
            _probes_of(probes, len(batch.keys), unsure),
        )
        replaced = _concat(replaced, _shifted(sub.replaced, unsure))
        for p, rows in sub.inserts.items():
            inserts.setdefault(p, []).append(unsure[rows])
    return Upserts(replaced, {p: np.sort(np.concatenate(v)) for p, v in inserts.items()})


def route_deletes(plan: Planner, dbatch: Batch) -> Replaced:
    """The deletes to write, reading only the candidates of keys the index cannot place: a
    key in one group gets a delete entry there (a no-op for the reader if the group does not
    hold it); a key in no group is not stored (deleting it is a no-op)."""
    count, only, probes = _single(plan, dbatch)
    dpos = np.flatnonzero(count == 1)
    unsure = np.flatnonzero(count > 1)
    has = dbatch.ordering is not None
    out = Replaced(
        file=only[dpos],
        row=np.full(len(dpos), -1, dtype=np.int64),
        keys=dbatch.keys.take(pa.array(dpos, pa.int64())),
        new=np.full(len(dpos), -1, dtype=np.int64),
        ordering=dbatch.ordering.take(pa.array(dpos, pa.int64()))
        if dbatch.ordering is not None
        else None,
    )
    if len(unsure):
        sub = decide_deletes(
            plan, _pick(dbatch, unsure), _probes_of(probes, len(dbatch.keys), unsure)
        )
        if not has:  # decided here, so it wins unconditionally like the unread ones
            sub = Replaced(sub.file, sub.row, sub.keys, sub.new, None)
        out = _concat(out, sub)
    return out
