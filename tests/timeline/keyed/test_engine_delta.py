"""Delta commits split over an engine's tasks (keyed/write/engine.py): the plan is picklable, the
shards of one write together read each object at most once and list nothing, and the
commit reads as the one-process writer's."""

from __future__ import annotations

import pickle
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage import StoreSettings, open_store
from timeline import DELTA_COMMIT, Table, commit_shards, plan_engine_write, run_shard
from timeline.file_groups import logs_of
from timeline.keyed import build_index
from timeline.keyed.properties import KeyedProperties

PROPS = KeyedProperties.of(
    "id", ordering_field="ts", partition_by="p", key_scope="partition",
    merge_mode="event_time", table_type="merge_on_read",
)  # fmt: skip


def _rows(ids: list[int], v: str, ts: int = 1) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "p": [f"p{i // 2 % 4}" for i in ids],
            "v": [v] * len(ids),
        }
    )


def _table(path: Path) -> Table:
    from tests.timeline.keyed.test_mor_tables import OFF

    store = open_store(f"file://{path}", StoreSettings(fsync=False))
    t = Table.create(store, PROPS, replace(OFF, small_file_limit=0))  # each write: new groups
    # Two file groups per partition whose key ranges overlap, with filters too large to
    # keep inline in the commit (1,500 keys each): the index GETs their sidecars.
    t.upsert(_rows(list(range(0, 12000, 2)), "a"))
    t.upsert(_rows(list(range(1, 12000, 2)), "b"))
    t.upsert(_rows([1, 2, 41], "c", ts=2))  # logs
    return t


class _Counting:
    """A local store's reads by key (`get` reads through `open_read`) and its listings,
    wherever a task's table makes them."""

    READS = ("get_object", "open_read")
    LISTS = ("list", "list_page")

    def __init__(self, store: Any) -> None:
        self.gets: Counter[str] = Counter()
        self.lists: list[str] = []
        for name in (*self.READS, *self.LISTS):
            setattr(store, name, self._counted(name, getattr(store, name)))

    def _counted(self, name: str, inner: Any) -> Any:
        def call(key: str = "", *a: Any, **k: Any) -> Any:
            if name in self.READS:
                self.gets[key] += 1
            else:
                self.lists.append(key)
            return inner(key, *a, **k)

        return call


@pytest.mark.unit
def test_shards_read_each_object_once_list_nothing_and_commit_as_the_python_path(
    tmp_path: Path,
) -> None:
    """An upsert over four partitions (updates of base and log records, an older version
    that loses, new keys) run as one shard per partition, each on its own unloaded table
    handle and an unpickled plan: no task lists, no object is fetched twice in the write,
    and the table reads as the same upsert through `Table.upsert` on a twin table."""
    engine, python = _table(tmp_path / "engine"), _table(tmp_path / "python")
    batch = pa.concat_tables(
        [_rows([1, 5, 42, 77], "d", ts=3), _rows([2], "old", ts=0), _rows([100, 101], "n")]
    )
    txn = engine.begin(DELTA_COMMIT, operation="upsert")
    plan = plan_engine_write(engine, txn, PROPS, batch.schema, "upsert")
    shipped = pickle.loads(pickle.dumps(plan))
    store = open_store(engine.store.uri, StoreSettings(fsync=False))
    counting = _Counting(store)
    shards = []
    for i, p in enumerate(sorted(set(batch.column("p").to_pylist()))):
        part = batch.filter(pc.equal(batch.column("p"), p))
        shards.append(run_shard(Table(store, shipped.settings), shipped, part, f"t{i}"))
    assert counting.lists == []
    assert counting.gets and max(counting.gets.values()) == 1, counting.gets
    commit_shards(txn, plan, shards)
    python.upsert(batch)
    got = Table.open(engine.store).read().sort_by("id").to_pylist()
    want = Table.open(python.store).read().sort_by("id").to_pylist()

    def strip(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["id"], r["p"], r["v"], r["ts"]) for r in rows]

    assert strip(got) == strip(want)
    assert [r["v"] for r in got if r["id"] in (1, 2, 5, 100)] == ["d", "c", "d", "n"]
    entry = Table.open(engine.store).entry(txn.instant_time)
    assert entry.action == DELTA_COMMIT and entry.metadata["log_files"]


@pytest.mark.unit
def test_shards_route_keys_through_the_record_level_index_when_it_is_built(
    tmp_path: Path,
) -> None:
    """With the record-level index built and current, each task asks it which file group
    holds its keys (it fetches index shards) instead of probing every overlapping group's
    bloom filter: the only filters fetched are those of the groups the write appends logs
    to (their log's key stats name what the base's filter does not). The commit reads as
    the one-process write, which asks the index too."""
    engine, python = _table(tmp_path / "engine"), _table(tmp_path / "python")
    build_index(engine)
    build_index(python)
    batch = pa.concat_tables([_rows([1, 5, 42, 77], "d", ts=3), _rows([100, 101], "n")])
    txn = engine.begin(DELTA_COMMIT, operation="upsert")
    plan = plan_engine_write(engine, txn, PROPS, batch.schema, "upsert")
    store = open_store(engine.store.uri, StoreSettings(fsync=False))
    counting = _Counting(store)
    shards = []
    for i, p in enumerate(sorted(set(batch.column("p").to_pylist()))):
        part = batch.filter(pc.equal(batch.column("p"), p))
        shards.append(run_shard(Table(store, plan.settings), plan, part, f"t{i}"))
    commit_shards(txn, plan, shards)
    python.upsert(batch)
    assert any("/_record_index/" in k for k in counting.gets), counting.gets
    blooms = {k for k in counting.gets if k.endswith(".bloom")}
    logged = {lf.file_group for lf in logs_of(engine.state().writes[txn.instant_time].metadata)}
    slices = engine.state().latest_slices()

    def bloom(g: str) -> str:
        return slices[g].base.path.removesuffix(".parquet") + ".bloom"

    assert blooms <= {bloom(g) for g in logged}, blooms
    assert len(blooms) < len({bloom(g) for g in slices})

    def strip(t: Table) -> list[tuple[Any, ...]]:
        rows = Table.open(t.store).read().sort_by("id").to_pylist()
        return [(r["id"], r["p"], r["v"], r["ts"]) for r in rows]

    assert strip(engine) == strip(python)
