"""The event id allocator's document: the next free id and the open allocations (ranges a
writer took whose object it has not reported written; see provenance/ids.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

ALLOCATOR_KEY = "ids/next-event-id"
#: Writer of an open allocation that stands for ids whose fate is unknown (an allocator written
#: before open allocations were recorded, or rebuilt after it was lost): holes there are honest.
UNKNOWN_WRITER = "unknown"
#: Bound on the open allocations kept (dead writers' entries go once rollover passes them).
MAX_OPEN = 10_000


@dataclass(frozen=True)
class Allocation:
    """Ids [first, end) taken by `writer` whose object it has not reported written yet."""

    first: int
    end: int
    writer: str
    at_ms: int

    def to_json(self) -> list[Any]:
        return [self.first, self.end, self.writer, self.at_ms]


@dataclass(frozen=True)
class AllocatorState:
    """The allocator document: the next free id and the open allocations."""

    next_id: int
    open: tuple[Allocation, ...]
    etag: str


def parse_state(body: dict[str, Any], etag: str) -> AllocatorState:
    next_id = int(body["next_event_id"])
    if "open" not in body:  # written before open allocations were recorded
        legacy = (Allocation(0, next_id, UNKNOWN_WRITER, 0),) if next_id > 0 else ()
        return AllocatorState(next_id, legacy, etag)
    return AllocatorState(
        next_id,
        tuple(Allocation(int(a), int(b), str(w), int(t)) for a, b, w, t in body["open"]),
        etag,
    )


def now_ms() -> int:
    return int(time.time() * 1000)
