"""A copy-on-write write hands each file group's rows to its writer thread as int64 arrays
of batch positions (Arrow takes them as a view; a list of Python ints would be converted
under the GIL in every writer thread), and writes the same rows as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties
from timeline.keyed.write import copy_on_write
from timeline.keyed.write.planner import by_partition

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="part")


def _rows(lo: int, hi: int) -> pa.Table:
    ids = np.arange(lo, hi)
    return pa.table({"id": ids, "part": [f"p{i % 3}" for i in ids.tolist()], "ts": ids})


def test_groups_carry_positions_as_int64_arrays(tmp_path: Path, monkeypatch: Any) -> None:
    store = open_store(f"file://{tmp_path}", StoreSettings())
    t = Table.create(store, PROPS, settings=TableSettings(local_entry_cache=False))
    t.insert(_rows(0, 300))
    seen: list[tuple[Any, Any]] = []
    real = copy_on_write.write_group_at

    def spy(*args: Any, **kwargs: Any) -> Any:
        g = args[3]
        seen.append((g.new, g.placed))
        return real(*args, **kwargs)

    monkeypatch.setattr(copy_on_write, "write_group_at", spy)
    t.upsert(_rows(200, 500))  # updates of 100 stored keys and 200 new ones
    assert seen
    for new, placed in seen:
        assert isinstance(new, np.ndarray) and new.dtype == np.int64
        assert isinstance(placed, np.ndarray) and placed.dtype == np.int64
    assert sum(len(n) for n, _ in seen) == 300  # every batch row written once
    assert sum(len(p) for _, p in seen) == 200  # of which the new records placed
    got = t.read(columns=["id", "ts"]).sort_by("id")
    assert got.column("id").to_pylist() == list(range(500))


@pytest.mark.parametrize("rows", [0, 1, 5_000])
def test_positions_by_partition_are_each_partitions_in_order(rows: int) -> None:
    """A batch's positions split by partition path with one sort of the paths' codes: each
    partition's positions ascending, the partitions in the order they first occur."""
    rng = np.random.default_rng(rows)
    paths = pa.array(rng.choice(["part=b", "part=a", "part=c"], rows).tolist(), pa.string())
    positions = np.sort(rng.choice(10 * rows + 1, rows, replace=False)).astype(np.int64)
    got = by_partition(paths, positions)
    names = paths.to_pylist()
    first_seen = list(dict.fromkeys(names))
    assert list(got) == first_seen
    for name in first_seen:
        want = positions[[i for i, p in enumerate(names) if p == name]]
        assert got[name].tolist() == want.tolist()
