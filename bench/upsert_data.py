"""The upsert benchmark's inputs: one set of local Parquet files every system reads, so each
applies exactly the same rows (generation stays outside every measurement).

Keys are int64 `id`s in arrival order: the base table is loaded in `load_batches` commits of
consecutive ids (as a table fed over time is), so each file's key range is narrow and an index
on key ranges can prune. Partition `part` is a hash of the key (`id % partitions`), so every
batch touches every partition and a key's partition never changes.

Steps, in the order every system runs them:
  upsert_random     80 % updates of keys drawn uniformly from the whole table, 20 % new keys
  upsert_clustered  80 % updates of keys drawn from the newest 5 % of the table, 20 % new keys
  delete            keys drawn uniformly from the table (rows: id, part, ts)
  append            the clustered batch's rows under fresh keys: the cost of writing the same
                    amount of data with no lookup, the baseline of the clustered upsert
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CATEGORIES = [f"cat-{i:02d}" for i in range(32)]


@dataclass(frozen=True)
class Workload:
    rows: int = 10_000_000
    batch: int = 100_000
    delete: int = 10_000
    partitions: int = 20
    load_batches: int = 10
    update_fraction: float = 0.8
    newest_fraction: float = 0.05
    seed: int = 20


@dataclass(frozen=True)
class Step:
    name: str
    path: str  # the input Parquet file
    rows: int  # rows the step changes (updated + inserted, deleted or appended)
    bytes: int  # those rows as Parquet (pyarrow, zstd): the "bytes changed"
    kind: str  # "load", "upsert", "delete" or "append"


@dataclass(frozen=True)
class Inputs:
    workload: Workload
    loads: list[Step]
    steps: list[Step]
    expected_rows: int  # after every step
    columns: list[str]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> Inputs:
        raw = json.loads(path.read_text())
        return cls(
            Workload(**raw["workload"]),
            [Step(**s) for s in raw["loads"]],
            [Step(**s) for s in raw["steps"]],
            raw["expected_rows"],
            raw["columns"],
        )


def rows_for(ids: np.ndarray, version: int, partitions: int, rng: np.random.Generator) -> pa.Table:
    """Ten columns; `ts` (the ordering field) grows with `version` so a later write wins under
    either merge mode."""
    n = len(ids)
    part = pa.array([f"p{p:02d}" for p in range(partitions)])
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": part.take(pa.array(ids % partitions)),
            "ts": pa.array(np.full(n, version, dtype=np.int64) * 1_000_000_000 + ids),
            "event_time": pa.array(
                (1_700_000_000_000_000 + ids * 1000 + version).astype("datetime64[us]"),
                pa.timestamp("us", tz="UTC"),
            ),
            "amount": pa.array(rng.random(n) * 1000),
            "qty": pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
            "category": pa.array(CATEGORIES).take(pa.array(rng.integers(0, len(CATEGORIES), n))),
            "name": pa.array([f"name-{i}-v{version}" for i in ids.tolist()]),
            "flag": pa.array(rng.random(n) < 0.5),
            "score": pa.array(rng.normal(size=n)),
        }
    )


def write_step(out: Path, name: str, data: pa.Table, kind: str) -> Step:
    path = out / f"{name}.parquet"
    pq.write_table(data, path, compression="zstd")
    return Step(name, str(path), data.num_rows, path.stat().st_size, kind)


def write_loads(w: Workload, out: Path, rng: np.random.Generator) -> list[Step]:
    """The base table's load commits (consecutive keys each); `rng` then goes on to the steps,
    so every benchmark that starts from these draws has the same table and first upsert."""
    out.mkdir(parents=True, exist_ok=True)
    loads = []
    per = -(-w.rows // w.load_batches)
    for i, lo in enumerate(range(0, w.rows, per)):
        ids = np.arange(lo, min(lo + per, w.rows), dtype=np.int64)
        loads.append(write_step(out, f"load_{i:03d}", rows_for(ids, 1, w.partitions, rng), "load"))
    return loads


def generate(w: Workload, out: Path) -> Inputs:
    rng = np.random.default_rng(w.seed)
    loads = write_loads(w, out, rng)

    n_upd = int(w.batch * w.update_fraction)
    n_new = w.batch - n_upd
    next_id = w.rows  # ids are allocated in arrival order, never reused
    live = w.rows

    steps = []
    upd = rng.choice(next_id, n_upd, replace=False)
    new = np.arange(next_id, next_id + n_new, dtype=np.int64)
    next_id, live = next_id + n_new, live + n_new
    batch = rows_for(np.concatenate([upd, new]), 2, w.partitions, rng)
    steps.append(write_step(out, "upsert_random", batch, "upsert"))

    newest = max(n_upd, int(next_id * w.newest_fraction))
    upd = next_id - newest + rng.choice(newest, n_upd, replace=False)
    new = np.arange(next_id, next_id + n_new, dtype=np.int64)
    next_id, live = next_id + n_new, live + n_new
    clustered = rows_for(np.concatenate([upd, new]), 3, w.partitions, rng)
    steps.append(write_step(out, "upsert_clustered", clustered, "upsert"))

    gone = rows_for(rng.choice(next_id, w.delete, replace=False), 4, w.partitions, rng)
    # What a delete changes is the deleted rows, so their full width is its "bytes changed".
    full = write_step(out, "delete_rows", gone, "delete")
    keys = write_step(out, "delete", gone.select(["id", "part", "ts"]), "delete")
    steps.append(Step(keys.name, keys.path, keys.rows, full.bytes, "delete"))
    live -= w.delete

    fresh = np.arange(next_id, next_id + clustered.num_rows, dtype=np.int64)
    appended = clustered.set_column(0, "id", pa.array(fresh, pa.int64()))
    appended = appended.set_column(
        1, "part", pa.array([f"p{p:02d}" for p in (fresh % w.partitions).tolist()])
    )
    steps.append(write_step(out, "append", appended, "append"))
    live += appended.num_rows

    inputs = Inputs(w, loads, steps, live, batch.column_names)
    inputs.save(out / "inputs.json")
    return inputs
