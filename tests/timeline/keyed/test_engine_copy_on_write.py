"""Copy-on-write commits split over an engine's tasks (keyed/write/engine.py): the plan is
picklable, the shards of one write together read each object at most once and list
nothing, and the commit reads as the one-process writer's."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage import StoreSettings, open_store
from tests.timeline.keyed.test_engine_delta import _Counting
from timeline import (
    COMMIT,
    Table,
    TableSettings,
    WriterNotSupported,
    commit_shards,
    plan_engine_write,
    run_shard,
    shard_columns,
)
from timeline.keyed.properties import KeyedProperties

PROPS = KeyedProperties.of(
    "id", ordering_field="ts", partition_by="p", key_scope="partition",
    merge_mode="event_time",
)  # fmt: skip
GLOBAL_PROPS = replace(PROPS, key_scope="global")
OFF = TableSettings(compaction_mode="off", local_entry_cache=False)


def _rows(ids: list[int], v: str, ts: int = 1, shift: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "p": [f"p{(i // 2 + shift) % 4}" for i in ids],
            "v": [v] * len(ids),
        }
    )


def _table(path: Path, props: KeyedProperties, small_files: bool) -> Table:
    store = open_store(f"file://{path}", StoreSettings(fsync=False))
    settings = OFF if small_files else replace(OFF, small_file_limit=0)
    t = Table.create(store, props, settings)
    # Two file groups per partition whose key ranges overlap, with filters too large to
    # keep inline in the commit (1,500 keys each): the index GETs their sidecars.
    t.upsert(_rows(list(range(0, 12000, 2)), "a"))
    t.upsert(_rows(list(range(1, 12000, 2)), "b"))
    return t


def _strip(t: Table) -> list[tuple[Any, ...]]:
    rows = Table.open(t.store).read().sort_by("id").to_pylist()
    return [(r["id"], r["p"], r["v"], r["ts"]) for r in rows]


def _engine_write(
    t: Table, props: KeyedProperties, batch: pa.Table, operation: str
) -> tuple[str, _Counting]:
    """`batch` written as the engine writes it: one shard per `shard_columns` value, each
    on its own unloaded table handle and an unpickled plan, committed by the driver."""
    txn = t.begin(COMMIT, operation=operation)
    incoming = batch.schema if operation != "delete" else None
    plan = plan_engine_write(t, txn, props, incoming, operation)
    shipped = pickle.loads(pickle.dumps(plan))
    store = open_store(t.store.uri, StoreSettings(fsync=False))
    counting = _Counting(store)
    by = shard_columns(props)
    keys = sorted(set(batch.column(by[0]).to_pylist())) if by else [None]
    shards = []
    for i, k in enumerate(keys):
        part = batch if k is None else batch.filter(pc.equal(batch.column(by[0]), k))
        shards.append(run_shard(Table(store, shipped.settings), shipped, part, f"t{i}"))
    commit_shards(txn, plan, shards)
    return txn.instant_time, counting


def _upserts() -> pa.Table:
    return pa.concat_tables(
        [_rows([1, 5, 42, 77], "d", ts=3), _rows([2], "old", ts=0), _rows([20001, 20003], "n")]
    )


@pytest.mark.unit
@pytest.mark.parametrize("small_files", [True, False])
def test_partition_shards_read_each_object_once_list_nothing_and_write_as_the_python_path(
    tmp_path: Path, small_files: bool
) -> None:
    """An upsert over four partitions (updates, an older version that loses, new keys into
    small files or new file groups) run as one shard per partition: no task lists, no object
    is fetched twice in the write, the slices carry the task's name, and the table reads as
    the same upsert through `Table.upsert` on a twin table."""
    engine = _table(tmp_path / "engine", PROPS, small_files)
    python = _table(tmp_path / "python", PROPS, small_files)
    batch = _upserts()
    instant, counting = _engine_write(engine, PROPS, batch, "upsert")
    assert counting.lists == []
    assert counting.gets and max(counting.gets.values()) == 1, counting.gets
    python.upsert(batch)
    assert _strip(engine) == _strip(python)
    got = {r[0]: r[2] for r in _strip(engine)}
    assert [got[i] for i in (1, 2, 5, 20001)] == ["d", "a", "d", "n"]
    entry = Table.open(engine.store).entry(instant)
    assert entry.action == COMMIT and entry.metadata["write_stats"]
    assert entry.metadata["keyed"]["files_read"] > 0
    rewritten = [f.path for f in entry.added if not f.path.endswith(f"-0_{instant}.parquet")]
    assert rewritten and all("_t" in p.rsplit("/", 1)[-1] for p in rewritten)


@pytest.mark.unit
def test_a_global_key_moving_partition_and_deletes_match_the_python_path(tmp_path: Path) -> None:
    """Global keys: one shard; a key whose partition changed leaves its old group and lands
    in its new partition, as in one process; a delete by key runs as shards too."""
    engine = _table(tmp_path / "engine", GLOBAL_PROPS, True)
    python = _table(tmp_path / "python", GLOBAL_PROPS, True)
    moved = _rows([1, 5, 6000], "m", ts=3, shift=1)
    _engine_write(engine, GLOBAL_PROPS, moved, "upsert")
    python.upsert(moved)
    assert _strip(engine) == _strip(python)
    assert {r[0]: r[1] for r in _strip(engine)}[1] == "p1"
    gone = pa.table({"id": [2, 5, 7, 99999]})
    _, counting = _engine_write(engine, GLOBAL_PROPS, gone, "delete")
    assert counting.lists == [] and max(counting.gets.values()) == 1, counting.gets
    python.delete(gone)
    assert _strip(engine) == _strip(python)
    assert not {2, 5, 7} & {r[0] for r in _strip(engine)}


@pytest.mark.unit
def test_a_commit_instant_on_a_merge_on_read_table_is_refused_with_one_line(
    tmp_path: Path,
) -> None:
    """Rewriting a merge-on-read group from its base file would drop its logs: the engine's
    plan refuses a `commit` instant on such a table, naming the action its writes take."""
    mor = replace(PROPS, table_type="merge_on_read")
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    t = Table.create(store, mor, OFF)
    txn = t.begin(COMMIT, operation="upsert")
    try:
        with pytest.raises(WriterNotSupported) as caught:
            plan_engine_write(t, txn, mor, _rows([1], "x").schema, "upsert")
    finally:
        txn.abort()
    message = str(caught.value)
    assert "\n" not in message and "deltacommit" in message and "merge_on_read" in message
