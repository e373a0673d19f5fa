"""The merge-on-read benchmark's inputs: bench/upsert.py's base table and first random upsert
(bench/upsert_data.py, same seed and draws, so the two benchmarks start from identical data),
followed by more random upserts of the same size and mix (80 % updates of keys drawn uniformly
from every live key, 20 % new keys), one per delta commit.

Each read step is checked against the expected state after that many upserts: the row count
and the sum of `qty` (every update draws a new `qty`, so a reader that misses a log, or applies
one twice, gets a different sum).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.upsert_data import Step, Workload, rows_for, write_loads, write_step

READS_AT = (1, 5, 20)  # delta commits after which the snapshot and read-optimized reads run


@dataclass(frozen=True)
class Expected:
    rows: int
    qty_sum: int


@dataclass(frozen=True)
class MorInputs:
    workload: Workload
    loads: list[Step]
    upserts: list[Step]  # upserts[0] is bench/upsert.py's `upsert_random`
    reads_at: list[int]
    expected: dict[str, Expected]  # str(upserts applied) -> the table's state then
    columns: list[str]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> MorInputs:
        raw = json.loads(path.read_text())
        return cls(
            Workload(**raw["workload"]),
            [Step(**s) for s in raw["loads"]],
            [Step(**s) for s in raw["upserts"]],
            list(raw["reads_at"]),
            {k: Expected(**v) for k, v in raw["expected"].items()},
            raw["columns"],
        )


class _State:
    """The reference table: `qty` and liveness per key (keys are dense int64 ids)."""

    def __init__(self, size: int) -> None:
        self.qty = np.zeros(size, dtype=np.int64)
        self.live = np.zeros(size, dtype=bool)

    def apply(self, path: str) -> None:
        t = pq.read_table(path, columns=["id", "qty"])
        ids = t.column("id").to_numpy()
        self.qty[ids] = t.column("qty").to_numpy()
        self.live[ids] = True

    def expected(self) -> Expected:
        return Expected(int(self.live.sum()), int(self.qty[self.live].sum()))


def generate(w: Workload, out: Path, reads_at: tuple[int, ...] = READS_AT) -> MorInputs:
    rng = np.random.default_rng(w.seed)  # the draws of bench/upsert_data.generate, in order
    loads = write_loads(w, out, rng)
    n_upd = int(w.batch * w.update_fraction)
    n_new = w.batch - n_upd
    deltas = max(reads_at)
    state = _State(w.rows + deltas * n_new)
    for s in loads:
        state.apply(s.path)
    upserts, expected = [], {}
    next_id = w.rows
    for i in range(1, deltas + 1):
        upd = rng.choice(next_id, n_upd, replace=False)
        new = np.arange(next_id, next_id + n_new, dtype=np.int64)
        next_id += n_new
        batch = rows_for(np.concatenate([upd, new]), i + 1, w.partitions, rng)
        step = write_step(out, f"upsert_{i:02d}", batch, "upsert")
        upserts.append(step)
        state.apply(step.path)
        if i in reads_at:
            expected[str(i)] = state.expected()
    columns = pq.read_schema(loads[0].path).names
    inputs = MorInputs(w, loads, upserts, sorted(reads_at), expected, columns)
    inputs.save(out / "inputs.json")
    return inputs
