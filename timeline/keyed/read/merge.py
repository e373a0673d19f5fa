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

Vectorized, and per base row only what cannot be avoided: the log blocks are joined as
chunks (never copied whole); every log entry and base row gets one number per (slice, key)
pair, the entries are sorted by it once (stable: entries of a key stay in log order) and the
base rows are binary-searched into them, so pairing is one sort of the entries and a search
per base row (integer keys; record key text is first coded, the base rows some entry names
found by a membership test). The fold runs rank by rank (the first entry of every key, then
the second, ...), each rank a few array operations, so its cost follows the entries, never a
loop over records; tables merged by commit time skip it (the last entry of a key decides).
Base rows no log names are kept as they are; a base that loses rows is filtered once. A
reader that decodes bases itself sets their unnamed rows apart first, on the decoding thread
(keyed/read/split.py), and merges only the named rows here. Keys are matched as numbers
when the table's record key is a single integer column (`key_col`: its text is the record
key, so equal numbers are equal keys); otherwise as the record key text.
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
    # the log rows as chunks (a block each, no copy); the few columns the fold reads are
    # made one array each, the rest is only taken down to the winners at the end
    logs_all = concat(every)
    lg_ = np.concatenate(lgroup)
    sizes = [n for n, _ in ruled]
    ops = logs_all.column(OP_COL).combine_chunks()
    up = np.asarray(pc.equal(ops, UPSERT).to_numpy(zero_copy_only=False), bool)
    by = {r.merge_by for _, r in ruled if r.merge_by}
    if not by:
        cmp = np.zeros(len(up), dtype=bool)
        field = ""
    else:
        (field,) = by  # a table's ordering field never changes
        cmp_up = np.repeat([bool(r.merge_by) for _, r in ruled], sizes)
        cmp_del = np.repeat([bool(r.merge_by) and r.ordered_deletes for _, r in ruled], sizes)
        cmp = np.where(up, cmp_up, cmp_del)
    paired = _paired(base_all, logs_all, key_col, lg_, starts)
    dropped, won = _fold(base_all, paired, logs_all, up, cmp, field)
    # each slice's surviving base rows in base order, then its upserts in log order; the
    # logs are in slice order, so each slice's winners are a contiguous run of `ups`, and
    # `dropped` (ascending) holds each slice's lost base rows as a contiguous run too. The
    # winners are taken from the blocks as they are (a chunk each: Arrow's take across
    # chunks costs less than copying the blocks into one first, or filtering chunk by chunk)
    winners = np.flatnonzero(won)
    ups = logs_all.take(pa.array(winners, pa.int64())).drop_columns([OP_COL])
    bounds = np.searchsorted(lg_[winners], np.arange(len(slices) + 1))
    cuts = np.searchsorted(dropped, starts)
    kept = [_without(b, dropped[cuts[g] : cuts[g + 1]] - starts[g]) for g, b in enumerate(bases)]
    out: list[pa.Table] = []
    for g in range(len(bases)):
        if kept[g].num_rows:  # (a slice whose named rows all lost adds no empty chunk)
            out.append(kept[g])
        if bounds[g + 1] > bounds[g]:
            out.append(ups.slice(int(bounds[g]), int(bounds[g + 1] - bounds[g])))
    if not out:
        out = [*kept[:1], ups]
    return concat(out)


def _without(b: pa.Table, gone: np.ndarray) -> pa.Table:
    """`b` less the rows at `gone` (ascending, each once): as it is when nothing goes, an
    empty slice of it when everything goes (the usual case for the named rows of a
    snapshot: a log entry names them because it replaces them), else filtered once."""
    if not len(gone):
        return b
    if len(gone) == b.num_rows:
        return b.slice(0, 0)
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


@dataclass(frozen=True)
class Paired:
    """The log entries and the named base rows of a merge, keys paired within their slice:
    each entry and each such row numbered by its (slice, key) pair, densely, in the order of
    the pairs, so that entries of one pair are a run of `order`."""

    order: np.ndarray  # log entries by (slice, key), entries of one pair in log order
    firsts: np.ndarray  # where in `order` each pair's run begins
    lcodes: np.ndarray  # each log entry's pair
    bidx: np.ndarray  # ascending positions of the base rows an entry of their slice names
    bcodes: np.ndarray  # their pairs


def _paired(
    base: pa.Table, logs: pa.Table, key_col: str | None, lg: np.ndarray, starts: np.ndarray
) -> Paired:
    """The pairing of `logs` (slice of each entry: `lg`) with the rows of `base` (slice
    `g`: rows `starts[g]` to `starts[g + 1]`): one stable sort of the entries by a single
    number per (slice, key), and a binary search of the base rows' numbers into them (a
    base row named only by another slice's entry is no pair: its slice keeps it)."""
    bidx, lk, bk = _key_numbers(base, logs, key_col)
    n, slices = len(lk), len(starts) - 1
    lo, hi = int(lk.min()), int(lk.max())
    if (hi - lo + 1) * max(slices, 1) >= 2**62:  # keys too far apart for one number
        _, dense = np.unique(np.r_[lk, bk], return_inverse=True)
        lk, bk = dense[:n], dense[n:]
        lo, hi = 0, int(lk.max())
    span = hi - lo + 1
    bg = np.searchsorted(starts, bidx, side="right") - 1  # the slice of each base row
    lnum = lg * span + (lk - lo)
    bnum = np.where((bk >= lo) & (bk <= hi), bg * span + (bk - lo), -1)
    order = np.argsort(lnum, kind="stable")
    sorted_num = lnum[order]
    fresh = np.ones(n, dtype=bool)
    fresh[1:] = sorted_num[1:] != sorted_num[:-1]
    pair = np.cumsum(fresh) - 1
    lcodes = np.empty(n, dtype=np.int64)
    lcodes[order] = pair
    at = np.minimum(np.searchsorted(sorted_num, bnum), n - 1)
    hit = sorted_num[at] == bnum
    return Paired(order, np.flatnonzero(fresh), lcodes, bidx[hit], pair[at[hit]])


def _key_numbers(
    base: pa.Table, logs: pa.Table, key_col: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The base rows that may be named (ascending positions), and numbers for the log
    entries' keys and for those rows' keys, equal exactly where the keys are equal: integer
    keys as they are (every base row, no membership test), record key text as codes (the
    rows some entry of any slice names)."""
    ints = _integer_keys(base, logs, key_col)
    if ints is not None:
        bcol, lkey = ints
        bkey = np.asarray(bcol.to_numpy(), dtype=np.int64)
        return np.arange(len(bkey), dtype=np.int64), lkey, bkey
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
    p: Paired,
    every: pa.Table,
    up: np.ndarray,
    cmp: np.ndarray,
    field: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Which named base rows are lost (ascending positions) and which log entries win (a
    mask over the entries)."""
    n = every.num_rows
    m = len(p.firsts)
    present = np.zeros(m, dtype=bool)
    src = np.full(m, -1, dtype=np.int64)  # the surviving version: n + named row, or log
    present[p.bcodes] = True
    src[p.bcodes] = n + np.arange(len(p.bidx), dtype=np.int64)
    if not cmp.any():  # unconditional: the last entry of each key decides
        last = p.order[np.r_[p.firsts[1:] - 1, n - 1]]
        present[:], src[:] = up[last], np.where(up[last], last, -1)
    else:
        _ranks(p, _ordering(base, p.bidx, every, field), up, cmp, present, src)
    final = src[present]
    kept = np.zeros(len(p.bidx), dtype=bool)
    kept[final[final >= n] - n] = True
    won = np.zeros(n, dtype=bool)
    won[final[final < n]] = True
    return p.bidx[~kept], won


def _ordering(base: pa.Table, bidx: np.ndarray, every: pa.Table, field: str) -> pa.Array:
    """The ordering values of the log entries, then of the named base rows, one array."""
    n = every.num_rows
    lord = every.column(field).combine_chunks() if field in every.column_names else None
    lord = lord if lord is not None else pa.nulls(n)
    bord = _take(base, field, bidx, len(bidx))
    if bord.type != lord.type:
        if pa.types.is_null(lord.type):
            lord = lord.cast(bord.type)
        else:
            bord = bord.cast(lord.type)
    return pa.concat_arrays([lord, bord])


def _ranks(
    p: Paired,
    ords: pa.Array,
    up: np.ndarray,
    cmp: np.ndarray,
    present: np.ndarray,
    src: np.ndarray,
) -> None:
    """The fold rank by rank (the first entry of every key, then the second, ...), each
    entry compared with the surviving version where its rule says: `present` and `src`
    updated in place."""
    n = len(p.order)
    rank = np.arange(n) - np.repeat(p.firsts, np.diff(np.r_[p.firsts, n]))
    for r in range(int(rank.max()) + 1 if n else 0):
        e = p.order[rank == r]  # one entry of each of these keys
        c = p.lcodes[e]
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
