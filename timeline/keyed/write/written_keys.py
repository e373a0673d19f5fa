"""The keys a streamed insert has written in one scope (a partition, or the whole table for
a global key), to find a key repeated in a later batch.

Keys are compared as the stream compares them (`kind`: the integer key column when there is
one, whose numbers are smaller and quicker to match than their text; else the record keys).
A batch whose keys do not reach into the range written so far is matched against nothing.
Integer keys that arrive as a progression (strictly increasing by a constant step: ids or
sequence numbers loaded in order, the same split by a hash of the key into partitions) are
kept as their first, last and step, three numbers whatever the batch's size; other keys are
held as they are, so what a stream holds grows with its commit only for keys that come in no
such order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A progression of integer keys: first, last, step (last = first + step * (count - 1)).
Run = tuple[int, int, int]


def progression(order: pa.Array | pa.ChunkedArray) -> Run | None:
    """`order` as (first, last, step) when its values are integers without nulls that rise
    by one constant step (a single value is a progression of step 1), else None."""
    if not pa.types.is_integer(order.type) or order.null_count or not len(order):
        return None
    values = np.asarray(order.to_numpy(zero_copy_only=False), dtype=np.int64)
    first, last = int(values[0]), int(values[-1])
    if len(values) == 1:
        return first, last, 1
    step, rest = divmod(last - first, len(values) - 1)
    if step <= 0 or rest:
        return None
    if not (np.diff(values) == step).all():
        return None
    return first, last, step


class KeyRuns:
    """Keys in the order they were added: integer progressions as (first, last, step), other
    keys as the arrays they came in."""

    def __init__(self) -> None:
        self.parts: list[Run | pa.Array | pa.ChunkedArray] = []
        self.count = 0

    @property
    def held_bytes(self) -> int:
        """The Arrow bytes of the keys held as they are (progressions take none)."""
        return sum(k.nbytes for k in self.parts if not isinstance(k, tuple))

    def add(self, order: pa.Array | pa.ChunkedArray) -> None:
        if not len(order):
            return
        self.count += len(order)
        run = progression(order)
        last = self.parts[-1] if self.parts else None
        if run is None:
            self.parts.append(order)
        elif isinstance(last, tuple) and _continues(last, run):
            self.parts[-1] = (last[0], run[1], last[2])
        else:
            self.parts.append(run)

    def runs(self) -> list[Run]:
        return [k for k in self.parts if isinstance(k, tuple)]

    def arrays(self) -> list[pa.Array | pa.ChunkedArray]:
        return [k for k in self.parts if not isinstance(k, tuple)]

    def texts(self, chunk: int = 1 << 20) -> Iterator[pa.Array]:
        """The keys as record key text (an integer's is its value as text), a chunk of at
        most `chunk` keys at a time."""
        for k in self.parts:
            if isinstance(k, tuple):
                first, last, step = k
                n = (last - first) // step + 1
                for i in range(0, n, chunk):
                    lo = first + i * step
                    values = np.arange(lo, lo + min(chunk, n - i) * step, step, dtype=np.int64)
                    yield pc.cast(pa.array(values), pa.string())
            else:
                for c in getattr(k, "chunks", [k]):
                    yield c if pa.types.is_string(c.type) else pc.cast(c, pa.string())


class WrittenKeys:
    """The keys written so far in one scope, as compared (`kind`): their range, the
    progressions they came in and the keys that came in none."""

    def __init__(self, kind: pa.DataType) -> None:
        self.kind = kind
        self.lo: Any = None
        self.hi: Any = None
        self.written = KeyRuns()

    @property
    def held_bytes(self) -> int:
        """The Arrow bytes of the keys held as they are (progressions take none)."""
        return self.written.held_bytes

    def repeated(self, order: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Which of the keys (`order`, as compared) were written before; their range joins
        the range written."""
        out = np.zeros(len(order), dtype=bool)
        if not len(order):
            return out
        mm = pc.min_max(order)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if self.lo is not None and not (hi < self.lo or lo > self.hi):
            out = self._matched(order, lo, hi)
        self.lo = lo if self.lo is None else min(lo, self.lo)
        self.hi = hi if self.hi is None else max(hi, self.hi)
        return out

    def _matched(self, order: pa.Array | pa.ChunkedArray, lo: Any, hi: Any) -> np.ndarray:
        out = np.zeros(len(order), dtype=bool)
        keys = self.written.arrays()
        if keys:
            chunks = [c for k in keys for c in getattr(k, "chunks", [k])]
            seen = pa.chunked_array(chunks, self.kind).combine_chunks()
            out |= pc.is_in(order, value_set=seen).to_numpy(zero_copy_only=False)
        runs = [r for r in self.written.runs() if not (hi < r[0] or lo > r[1])]
        if runs:
            values = np.asarray(order.to_numpy(zero_copy_only=False), dtype=np.int64)
            for first, last, step in runs:
                out |= (values >= first) & (values <= last) & ((values - first) % step == 0)
        return out

    def add(self, order: pa.Array | pa.ChunkedArray) -> None:
        """Record `order` (keys not written before, distinct) as written."""
        self.written.add(order)


def _continues(before: Run, run: Run) -> bool:
    """Whether `run` carries on the progression `before` (the next batch of ids in order)."""
    _, last, step = before
    if run[0] != last + step:
        return False
    return run[2] == step or run[0] == run[1]  # a single key carries on any step
