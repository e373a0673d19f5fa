"""The reader's merge of a file slice: a base file's rows with its log blocks applied.

Delta commits touching one file group conflict with each other, so a slice's blocks apply in
completion order. A block's entries are applied by the rule its log file records (LogFile):

- unconditionally (blocks of format 1 and 2, decided by their writer against the state it
  read; tables merged by commit time): the later entry wins, a delete removes the record;
- by ordering value (the event_time merge mode, decided here rather than by the writer, which
  reads no slice): an upsert replaces the record only when its ordering value is not older
  (a null value is the lowest) and inserts it when the record is absent; a delete removes
  it only when its ordering value is not older (Hudi's rule), or whatever that value when the
  delete carried none (`ordered_deletes` False).

Applying the rule to a block its writer already decided changes nothing: the writer compared
against the same merged state this fold reaches before the block, and wrote only winners
(a delete by key alone carried the stored value: a tie, which wins).

Vectorized: the logs are concatenated (they are small); base rows no log names are kept as
they are; for the named keys the fold runs rank by rank (the first entry of every key, then
the second, ...), each rank a few array operations, so its cost follows the entries, never a
loop over records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .keys import RECORD_KEY_COL
from .logfile import OP_COL, UPSERT
from .merge import not_older


@dataclass(frozen=True)
class Rule:
    """How one block's entries apply (from its LogFile)."""

    merge_by: str = ""  # ordering column compared; "": unconditionally
    ordered_deletes: bool = False  # deletes compared too


UNCONDITIONAL = Rule()


def merge(
    base: pa.Table, logs: Sequence[pa.Table], rules: Sequence[Rule] | None = None
) -> pa.Table:
    """`base` (no op column) with `logs` (op column) applied in order, each by its rule
    (None: all unconditionally); same columns as base: base rows that survive in base
    order, then the logs' surviving upserts in log order."""
    return merge_slices([(base, logs, rules)])


def merge_slices(
    slices: Sequence[tuple[pa.Table, Sequence[pa.Table], Sequence[Rule] | None]],
) -> pa.Table:
    """`merge` of many slices (base, logs, rules) in one pass, their results concatenated
    in the order given: one set of array operations for all of them, not one per file
    group. A key is matched within its own slice only (a key that moved between groups has
    an entry in each)."""
    bases: list[pa.Table] = []
    bgroup: list[np.ndarray] = []
    every: list[pa.Table] = []
    lgroup: list[np.ndarray] = []
    ruled: list[tuple[int, Rule]] = []  # (rows, rule) per log block, in `every` order
    for g, (base, logs, rules) in enumerate(slices):
        bases.append(base)
        bgroup.append(np.full(base.num_rows, g, dtype=np.int64))
        for lg, r in zip(
            logs, rules if rules is not None else [UNCONDITIONAL] * len(logs), strict=True
        ):
            if lg.num_rows:
                every.append(lg)
                lgroup.append(np.full(lg.num_rows, g, dtype=np.int64))
                ruled.append((lg.num_rows, r))
    if not every:
        return _concat(bases)
    base_all = _concat(bases)
    logs_all = pa.concat_tables(every, promote_options="default")
    bg, lg_ = np.concatenate(bgroup), np.concatenate(lgroup)
    sizes = [n for n, _ in ruled]
    up = np.asarray(pc.equal(logs_all.column(OP_COL), UPSERT).to_numpy(zero_copy_only=False), bool)
    by = {r.merge_by for _, r in ruled if r.merge_by}
    if not by:
        cmp = np.zeros(len(up), dtype=bool)
        field = ""
    else:
        (field,) = by  # a table's ordering field never changes
        cmp_up = np.repeat([bool(r.merge_by) for _, r in ruled], sizes)
        cmp_del = np.repeat([bool(r.merge_by) and r.ordered_deletes for _, r in ruled], sizes)
        cmp = np.where(up, cmp_up, cmp_del)
    keep, winners = _fold(base_all, bg, logs_all, lg_, up, cmp, field)
    # each slice's surviving base rows in base order, then its upserts in log order; the
    # logs are in slice order, so each slice's winners are a contiguous run of `winners`.
    # Filtering each base on its own keeps to single-chunk tables (no take across chunks).
    ups = logs_all.take(pa.array(winners, pa.int64())).drop_columns([OP_COL])
    bounds = np.searchsorted(lg_[winners], np.arange(len(slices) + 1))
    out: list[pa.Table] = []
    at = 0
    for g, b in enumerate(bases):
        m = keep[at : at + b.num_rows]
        at += b.num_rows
        if b.num_rows:
            out.append(b if m.all() else b.filter(pa.array(m)))
        if bounds[g + 1] > bounds[g]:
            out.append(ups.slice(int(bounds[g]), int(bounds[g + 1] - bounds[g])))
    if not out:
        out = [*bases[:1], ups]
    return pa.concat_tables(out, promote_options="default")


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    tables = [t for t in tables if t.num_columns] or tables[:1]
    return pa.concat_tables(tables, promote_options="default")


def _column(t: pa.Table, name: str, n: int) -> pa.Array:
    if name and name in t.column_names:
        return t.column(name).combine_chunks()
    return pa.nulls(n)


def _fold(
    base: pa.Table,
    bg: np.ndarray,
    every: pa.Table,
    lg: np.ndarray,
    up: np.ndarray,
    cmp: np.ndarray,
    field: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Which base rows survive (a mask) and which log entries (ascending positions)."""
    n = every.num_rows
    lkeys = every.column(RECORD_KEY_COL).combine_chunks()
    bkeys = base.column(RECORD_KEY_COL).combine_chunks() if base.num_rows else lkeys.slice(0, 0)
    named = np.asarray(pc.is_in(bkeys, value_set=lkeys).to_numpy(zero_copy_only=False), dtype=bool)
    bidx = np.flatnonzero(named)
    keys = (
        pc.dictionary_encode(
            pa.concat_arrays([lkeys, bkeys.take(pa.array(bidx, pa.int64())).cast(lkeys.type)])
        )
        .indices.to_numpy(zero_copy_only=False)
        .astype(np.int64)
    )
    # a key is matched within its slice: (slice, key) pairs numbered densely
    _, codes = np.unique(np.r_[lg, bg[bidx]] * (int(keys.max()) + 1) + keys, return_inverse=True)
    codes = codes.astype(np.int64)
    lcodes, bcodes = codes[:n], codes[n:]
    m = int(codes.max()) + 1
    present = np.zeros(m, dtype=bool)
    src = np.full(m, -1, dtype=np.int64)  # the surviving version: n + base position, or log
    present[bcodes] = True
    src[bcodes] = n + np.arange(len(bidx), dtype=np.int64)
    ords: pa.Array | None = None
    if cmp.any():
        lord = _column(every, field, n)
        bord = _column(base, field, base.num_rows).take(pa.array(bidx, pa.int64()))
        if bord.type != lord.type:
            if pa.types.is_null(lord.type):
                lord = lord.cast(bord.type)
            else:
                bord = bord.cast(lord.type)
        ords = pa.concat_arrays([lord, bord])  # log entries first, then the named base rows
    # entries of each key in log order; rank = how many of that key's entries came before
    order = np.lexsort((np.arange(n), lcodes))
    sc = lcodes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sc)) + 1]
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    if not cmp.any() and n:  # unconditional: the last entry of each key decides
        last = order[np.r_[starts[1:] - 1, n - 1]]
        c = lcodes[last]
        present[c], src[c] = up[last], np.where(up[last], last, -1)
    else:
        for r in range(int(rank.max()) + 1 if n else 0):
            e = order[rank == r]  # one entry of each of these keys
            c = lcodes[e]
            win = np.ones(len(e), dtype=bool)
            ask = cmp[e] & present[c]
            if ask.any():
                assert ords is not None
                q = np.flatnonzero(ask)
                inc = ords.take(pa.array(e[q], pa.int64()))
                sto = ords.take(pa.array(src[c[q]], pa.int64()))
                win[q] = not_older(sto, inc)
            ups, dels = win & up[e], win & ~up[e]
            present[c[ups]], src[c[ups]] = True, e[ups]
            present[c[dels]], src[c[dels]] = False, -1
    final = src[present]
    keep = ~named
    keep[bidx[final[final >= n] - n]] = True
    return keep, np.sort(final[final < n])
