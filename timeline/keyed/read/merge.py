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

Vectorized, and per base row only what cannot be avoided: the logs are concatenated (they
are small); one membership test over the base keys finds the base rows some log names, and
everything after it (pairing keys with their slice, the fold) runs over the log entries and
those named rows alone. The fold runs rank by rank (the first entry of every key, then the
second, ...), each rank a few array operations, so its cost follows the entries, never a
loop over records. Base rows no log names are kept as they are; a base that loses rows is
filtered once. A reader that decodes bases itself sets their unnamed rows apart first, on
the decoding thread (`named_mask`; keyed/read/slices.py), and merges only the named rows
here. Keys are matched as numbers when the table's record key is a single integer column
(`key_col`: its text is the record key, so equal numbers are equal keys); otherwise as the
record key text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..keys import RECORD_KEY_COL
from ..log import OP_COL, UPSERT
from ..merge import not_older


@dataclass(frozen=True)
class Rule:
    """How one block's entries apply (from its LogFile)."""

    merge_by: str = ""  # ordering column compared; "": unconditionally
    ordered_deletes: bool = False  # deletes compared too


UNCONDITIONAL = Rule()


def merge(
    base: pa.Table,
    logs: Sequence[pa.Table],
    rules: Sequence[Rule] | None = None,
    *,
    key_col: str | None = None,
) -> pa.Table:
    """`base` (no op column) with `logs` (op column) applied in order, each by its rule
    (None: all unconditionally); same columns as base: base rows that survive in base
    order, then the logs' surviving upserts in log order. `key_col`: the table's single
    integer record key column, matched as numbers (see the module)."""
    return merge_slices([(base, logs, rules)], key_col=key_col)


def merge_slices(
    slices: Sequence[tuple[pa.Table, Sequence[pa.Table], Sequence[Rule] | None]],
    *,
    key_col: str | None = None,
) -> pa.Table:
    """`merge` of many slices (base, logs, rules) in one pass, their results concatenated
    in the order given (chunks of the bases and logs, not one copy): one set of array
    operations for all of them, not one per file group. A key is matched within its own
    slice only (a key that moved between groups has an entry in each)."""
    bases = [base for base, _, _ in slices]
    every: list[pa.Table] = []
    lgroup: list[np.ndarray] = []
    ruled: list[tuple[int, Rule]] = []  # (rows, rule) per log block, in `every` order
    for g, (_, logs, rules) in enumerate(slices):
        for lg, r in zip(
            logs, rules if rules is not None else [UNCONDITIONAL] * len(logs), strict=True
        ):
            if lg.num_rows:
                every.append(lg)
                lgroup.append(np.full(lg.num_rows, g, dtype=np.int64))
                ruled.append((lg.num_rows, r))
    if not every:
        return _concat(bases)
    base_all = _concat(bases)  # chunks of the bases, no copy
    starts = np.cumsum([0, *(b.num_rows for b in bases)])  # each slice's first row there
    # one copy of the (few) log rows: every operation below then runs on one chunk, where
    # a take across a chunk per block (thousands after many delta commits) was slow
    logs_all = concat(every).combine_chunks()
    lg_ = np.concatenate(lgroup)
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
    bidx, lkey, bkey = _named(base_all, logs_all, key_col)
    bg = np.searchsorted(starts, bidx, side="right") - 1  # the slice of each named base row
    dropped, winners = _fold(base_all, bidx, bkey, bg, logs_all, lkey, lg_, up, cmp, field)
    # each slice's surviving base rows in base order, then its upserts in log order; the
    # logs are in slice order, so each slice's winners are a contiguous run of `winners`,
    # and `dropped` (ascending) holds each slice's lost base rows as a contiguous run too.
    ups = logs_all.take(pa.array(winners, pa.int64())).drop_columns([OP_COL])
    bounds = np.searchsorted(lg_[winners], np.arange(len(slices) + 1))
    cuts = np.searchsorted(dropped, starts)
    kept = [_without(b, dropped[cuts[g] : cuts[g + 1]] - starts[g]) for g, b in enumerate(bases)]
    out: list[pa.Table] = []
    for g, b in enumerate(bases):
        if b.num_rows:
            out.append(kept[g])
        if bounds[g + 1] > bounds[g]:
            out.append(ups.slice(int(bounds[g]), int(bounds[g + 1] - bounds[g])))
    if not out:
        out = [*bases[:1], ups]
    return concat(out)


def _without(b: pa.Table, gone: np.ndarray) -> pa.Table:
    """`b` less the rows at `gone`: as it is when nothing goes, else filtered once."""
    if not len(gone):
        return b
    mask = np.ones(b.num_rows, dtype=bool)
    mask[gone] = False
    return b.filter(pa.array(mask))


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    tables = [t for t in tables if t.num_columns] or tables[:1]
    return concat(tables)


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """`tables` as one (chunks, no copy). Tables of one schema (the usual case: blocks and
    bases of one read) are joined as they are; only when their schemas differ are they
    unified, which costs a schema comparison per table (thousands of blocks per read)."""
    try:
        return pa.concat_tables(tables)
    except pa.ArrowInvalid:
        return pa.concat_tables(tables, promote_options="default")


def _take(t: pa.Table, name: str, at: np.ndarray, n: int) -> pa.Array:
    """Column `name` of `t` at positions `at` (nulls: no such column), one array."""
    if name and name in t.column_names:
        col = t.column(name)
        return col.take(pa.array(at, pa.int64())).combine_chunks()
    return pa.nulls(n)


def named_mask(
    base: pa.Table, logs: Sequence[pa.Table], key_col: str | None = None
) -> pa.ChunkedArray | None:
    """Which rows of `base` some entry of `logs` names, keys matched as `merge` matches
    them (None: no entry, or no base row). A reader that decodes a base computes it as soon
    as the base is in, to set the rows no entry names apart (the most of a base, and
    untouched by the merge) before the merge of many slices runs."""
    entries = [lg for lg in logs if lg.num_rows]
    if not entries or not base.num_rows:
        return None
    cols = [RECORD_KEY_COL, *([key_col] if key_col else [])]
    keys = pa.concat_tables(
        [lg.select([c for c in cols if c in lg.column_names]) for lg in entries],
        promote_options="default",
    )
    ints = _integer_keys(base, keys, key_col)
    if ints is not None:
        bcol, lkey = ints
        return pc.is_in(bcol, value_set=pa.array(lkey))
    lkeys = keys.column(RECORD_KEY_COL).combine_chunks()
    return pc.is_in(base.column(RECORD_KEY_COL), value_set=lkeys)


def _named(
    base: pa.Table, logs: pa.Table, key_col: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The base rows whose key some log entry names (ascending positions; in any slice:
    `_fold` pairs keys with their own), and integer codes of the log entries' keys and of
    those rows' keys, equal exactly where the keys are equal."""
    ints = _integer_keys(base, logs, key_col)
    if ints is not None:
        bcol, lkey = ints
        named = pc.is_in(bcol, value_set=pa.array(lkey))
        bidx = _positions(named)
        bkey = bcol.take(pa.array(bidx, pa.int64())).to_numpy()
        return bidx, lkey, np.asarray(bkey, dtype=np.int64)
    lkeys = logs.column(RECORD_KEY_COL).combine_chunks()
    if not base.num_rows:
        return np.zeros(0, np.int64), _codes(lkeys), np.zeros(0, np.int64)
    bcol = base.column(RECORD_KEY_COL)
    bidx = _positions(pc.is_in(bcol, value_set=lkeys))
    bkeys = bcol.take(pa.array(bidx, pa.int64())).combine_chunks().cast(lkeys.type)
    codes = _codes(pa.concat_arrays([lkeys, bkeys]))
    return bidx, codes[: len(lkeys)], codes[len(lkeys) :]


def _codes(keys: pa.Array) -> np.ndarray:
    enc = pc.dictionary_encode(keys).indices
    return np.asarray(enc.to_numpy(zero_copy_only=False), dtype=np.int64)


def _positions(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.indices_nonzero(mask).to_numpy(zero_copy_only=False), dtype=np.int64)


def _integer_keys(
    base: pa.Table, logs: pa.Table, key_col: str | None
) -> tuple[pa.ChunkedArray, np.ndarray] | None:
    """The base's key column as int64 and the log entries' keys as int64, when records
    can be matched by `key_col`; None: match the record key text instead. A delete entry
    carries the record key text alone, which for an integer key is the number's text."""
    if not key_col or key_col not in logs.column_names:
        return None
    if base.num_rows and key_col not in base.column_names:
        return None
    typ = logs.schema.field(key_col).type
    if not (pa.types.is_integer(typ) or pa.types.is_null(typ)):
        return None
    if base.num_rows and not pa.types.is_integer(base.schema.field(key_col).type):
        return None
    try:
        lcol = logs.column(key_col).cast(pa.int64())
        if lcol.null_count:
            text = pc.cast(logs.column(RECORD_KEY_COL), pa.int64())
            lcol = pc.coalesce(lcol, text)
        bcol = (
            base.column(key_col).cast(pa.int64())
            if base.num_rows
            else pa.chunked_array([], pa.int64())
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # a value past int64, or a key text that is no number
    if bcol.null_count:
        return None
    return bcol, np.asarray(lcol.to_numpy(), dtype=np.int64)


def _fold(
    base: pa.Table,
    bidx: np.ndarray,
    bkey: np.ndarray,
    bg: np.ndarray,
    every: pa.Table,
    lkey: np.ndarray,
    lg: np.ndarray,
    up: np.ndarray,
    cmp: np.ndarray,
    field: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Which named base rows are lost (ascending positions) and which log entries win
    (ascending positions)."""
    n = every.num_rows
    # a key is matched within its slice: (slice, key) pairs numbered densely
    pg, pk = np.r_[lg, bg], np.r_[lkey, bkey]
    by_pair = np.lexsort((pk, pg))
    fresh = np.ones(len(by_pair), dtype=bool)
    fresh[1:] = (np.diff(pk[by_pair]) != 0) | (np.diff(pg[by_pair]) != 0)
    codes = np.empty(len(by_pair), dtype=np.int64)
    codes[by_pair] = np.cumsum(fresh) - 1
    lcodes, bcodes = codes[:n], codes[n:]
    m = int(codes.max()) + 1
    present = np.zeros(m, dtype=bool)
    src = np.full(m, -1, dtype=np.int64)  # the surviving version: n + named row, or log
    present[bcodes] = True
    src[bcodes] = n + np.arange(len(bidx), dtype=np.int64)
    ords: pa.Array | None = None
    if cmp.any():
        lord = every.column(field).combine_chunks() if field in every.column_names else None
        lord = lord if lord is not None else pa.nulls(n)
        bord = _take(base, field, bidx, len(bidx))
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
    kept = np.zeros(len(bidx), dtype=bool)
    kept[final[final >= n] - n] = True
    return bidx[~kept], np.sort(final[final < n])
