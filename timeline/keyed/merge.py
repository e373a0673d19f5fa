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

from .properties import EVENT_TIME, KeyedProperties


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
    event = props.merge_mode == EVENT_TIME and ordering is not None
    for i, ident in enumerate(ids):
        j = best.get(ident)
        if j is None or not event:
            best[ident] = i  # commit_time: the later row wins
            continue
        assert ordering is not None
        if _ordering_key(ordering[i]) >= _ordering_key(ordering[j]):
            best[ident] = i
    return sorted(best.values())


def incoming_wins(
    stored: Any, incoming: Any, props: KeyedProperties, *, has_ordering: bool
) -> bool:
    """Whether an incoming version (upsert or delete) replaces the stored one.
    `has_ordering` is False for a delete that carries no ordering value."""
    if props.merge_mode != EVENT_TIME or not has_ordering:
        return True
    return _ordering_key(incoming) >= _ordering_key(stored)
