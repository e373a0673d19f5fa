"""Merge modes (Hudi 1.x): which of two versions of a record wins.

- `commit_time`: the later write wins; inside one batch, the row that comes later.
- `event_time`: the higher ordering value wins; a tie goes to the later write (the later
  row of a batch, the incoming row over a stored one). A null ordering value is the lowest.

A delete follows Hudi's rule: it wins unless its ordering value is older than the stored
record's (event_time only). A delete without an ordering value (by keys alone, or by filter)
always wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .policies import MergeMode
from .properties import KeyedProperties


def _ordering_key(v: Any) -> tuple[int, Any]:
    return (0, 0) if v is None else (1, v)


def combine(
    ids: Sequence[str], ordering: Sequence[Any] | None, props: KeyedProperties
) -> list[int]:
    """Row positions that survive combining duplicate records of one batch, in input order
    (one per record)."""
    if len(set(ids)) == len(ids):
        return list(range(len(ids)))  # no duplicates (the common batch): nothing to combine
    best: dict[str, int] = {}
    event = props.merge_mode == MergeMode.EVENT_TIME and ordering is not None
    for i, ident in enumerate(ids):
        j = best.get(ident)
        if j is None or not event:
            best[ident] = i  # commit_time: the later row wins
            continue
        assert ordering is not None
        if _ordering_key(ordering[i]) >= _ordering_key(ordering[j]):
            best[ident] = i
    return sorted(best.values())


def distinct_integers(values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether an integer column without nulls holds no value twice: strictly increasing
    (ids and times in arrival order, one pass) or, failing that, after a sort: on 1M keys a
    few ms, or ~0.1 s shuffled, where counting the distinct keys as text by hashing
    (`count_distinct`) took 1.7 s."""
    arr = values.to_numpy()
    if len(arr) < 2 or bool(np.all(arr[1:] > arr[:-1])):
        return True
    ordered = np.sort(arr)  # (np.unique took seconds here, a plain sort milliseconds)
    return not bool(np.any(ordered[1:] == ordered[:-1]))


def combine_rows(
    ids: pa.Array,
    ordering: pa.Array | None,
    props: KeyedProperties,
) -> np.ndarray:
    """`combine` over Arrow arrays (vectorized): the surviving row positions, ascending."""
    n = len(ids)
    if n == 0 or len(pc.unique(ids)) == n:
        return np.arange(n, dtype=np.int64)
    pos = pa.array(np.arange(n, dtype=np.int64))
    if props.merge_mode != MergeMode.EVENT_TIME or ordering is None:
        t = pa.table({"id": ids, "pos": pos})  # commit_time: the later row wins
        kept = t.group_by("id").aggregate([("pos", "max")]).column("pos_max")
        return np.sort(kept.to_numpy())
    # event_time: the highest ordering value (null lowest), ties to the later row: the
    # last row of each id once sorted by (id, ordering, position).
    t = pa.table({"id": ids, "ord": ordering, "pos": pos})
    order = pc.sort_indices(
        t,
        sort_keys=[("id", "ascending"), ("ord", "ascending", "at_start"), ("pos", "ascending")],
    )
    t = t.take(order)
    sid = t.column("id").combine_chunks()
    last = np.ones(n, dtype=bool)
    if n > 1:
        last[:-1] = pc.not_equal(sid.slice(0, n - 1), sid.slice(1)).to_numpy(zero_copy_only=False)
    return np.sort(t.column("pos").to_numpy()[last])


def wins(
    stored: pa.Array, incoming: pa.Array | None, props: KeyedProperties, has: bool
) -> np.ndarray:
    """Which incoming versions (upserts or deletes) replace the stored ones, over aligned
    arrays: all of them unless the merge mode is event_time and the incoming side carries
    ordering values (`has`), then those not older than the stored ones."""
    if props.merge_mode != MergeMode.EVENT_TIME or not has or incoming is None:
        return np.ones(len(stored), dtype=bool)
    return not_older(stored, incoming)


def not_older(stored: pa.Array, incoming: pa.Array) -> np.ndarray:
    """Per aligned pair: whether the incoming ordering value is not older than the stored
    one (a null value is the lowest), as the event_time merge mode compares them."""
    try:
        inc = incoming if incoming.type == stored.type else pc.cast(incoming, stored.type)
        ge = pc.fill_null(pc.greater_equal(inc, stored), False)
        won = pc.or_(pc.is_null(stored), pc.and_(pc.is_valid(inc), ge))
        return np.asarray(pc.fill_null(won, False).to_numpy(zero_copy_only=False), dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pairs = zip(stored.to_pylist(), incoming.to_pylist(), strict=True)
        return np.array([_ordering_key(b) >= _ordering_key(a) for a, b in pairs], dtype=bool)
