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
    ruled = [
        (lg, r)
        for lg, r in zip(
            logs, rules if rules is not None else [UNCONDITIONAL] * len(logs), strict=True
        )
        if lg.num_rows
    ]
    if not ruled:
        return base
    every = pa.concat_tables([lg for lg, _ in ruled], promote_options="default")
    sizes = [lg.num_rows for lg, _ in ruled]
    up = np.asarray(pc.equal(every.column(OP_COL), UPSERT).to_numpy(zero_copy_only=False), bool)
    by = {r.merge_by for _, r in ruled if r.merge_by}
    if not by:
        return _latest_wins(base, every)
    (field,) = by  # a table's ordering field never changes
    cmp_up = np.repeat([bool(r.merge_by) for _, r in ruled], sizes)
    cmp_del = np.repeat([bool(r.merge_by) and r.ordered_deletes for _, r in ruled], sizes)
    return _fold(base, every, up, np.where(up, cmp_up, cmp_del), field)


def _latest_wins(base: pa.Table, every: pa.Table) -> pa.Table:
    n = every.num_rows
    # the latest entry of each key: the highest position (logs are in completion order)
    at = pa.table({"k": every.column(RECORD_KEY_COL), "i": np.arange(n, dtype=np.int64)})
    latest = np.sort(at.group_by("k").aggregate([("i", "max")]).column("i_max").to_numpy())
    if len(latest) < n:
        every = every.take(pa.array(latest, pa.int64()))
    named = every.column(RECORD_KEY_COL)
    kept = base.filter(pc.invert(pc.is_in(base.column(RECORD_KEY_COL), value_set=named)))
    upserts = every.filter(pc.equal(every.column(OP_COL), UPSERT)).drop_columns([OP_COL])
    return pa.concat_tables([kept, upserts], promote_options="default")


def _column(t: pa.Table, name: str, n: int) -> pa.Array:
    if name in t.column_names:
        return t.column(name).combine_chunks()
    return pa.nulls(n)


def _fold(base: pa.Table, every: pa.Table, up: np.ndarray, cmp: np.ndarray, field: str) -> pa.Table:
    n = every.num_rows
    lkeys = every.column(RECORD_KEY_COL).combine_chunks()
    bkeys = base.column(RECORD_KEY_COL).combine_chunks() if base.num_rows else lkeys.slice(0, 0)
    named = np.asarray(pc.is_in(bkeys, value_set=lkeys).to_numpy(zero_copy_only=False), dtype=bool)
    bidx = np.flatnonzero(named)
    codes = (
        pc.dictionary_encode(
            pa.concat_arrays([lkeys, bkeys.take(pa.array(bidx, pa.int64())).cast(lkeys.type)])
        )
        .indices.to_numpy(zero_copy_only=False)
        .astype(np.int64)
    )
    lcodes, bcodes = codes[:n], codes[n:]
    lord = _column(every, field, n)
    bord = _column(base, field, base.num_rows).take(pa.array(bidx, pa.int64()))
    if bord.type != lord.type:
        if pa.types.is_null(lord.type):
            lord = lord.cast(bord.type)
        else:
            bord = bord.cast(lord.type)
    ords = pa.concat_arrays([lord, bord])  # log entries first, then the named base rows
    m = int(codes.max()) + 1
    present = np.zeros(m, dtype=bool)
    src = np.full(m, -1, dtype=np.int64)  # the surviving version: index into `ords`
    present[bcodes] = True
    src[bcodes] = n + np.arange(len(bidx), dtype=np.int64)
    # entries of each key in log order; rank = how many of that key's entries came before
    order = np.lexsort((np.arange(n), lcodes))
    sc = lcodes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sc)) + 1]
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    for r in range(int(rank.max()) + 1 if n else 0):
        e = order[rank == r]  # one entry of each of these keys
        c = lcodes[e]
        win = np.ones(len(e), dtype=bool)
        ask = cmp[e] & present[c]
        if ask.any():
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
    kept = base.filter(pa.array(keep))
    winners = np.sort(final[final < n])
    upserts = every.take(pa.array(winners, pa.int64())).drop_columns([OP_COL])
    return pa.concat_tables([kept, upserts], promote_options="default")
