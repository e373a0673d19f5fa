"""Copy-on-write commits split over an engine's tasks (keyed/write/engine.py): the plan is
picklable, the shards of one write together read each object at most once per pass (an
upsert: its keys, then its rewrite; a delete: both at once) and list nothing, and the
commit reads as the one-process writer's."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage import StoreSettings, open_store
from tests.support.record_index import assert_index_matches_rebuild
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
from timeline.check import check_table
from timeline.keyed import build_index, index_view
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
    t: Table,
    props: KeyedProperties,
    batch: pa.Table,
    operation: str,
    one_task: bool = False,
    sweep: bool = True,
) -> tuple[str, _Counting]:
    """`batch` written as the engine writes it: one shard per `shard_columns` value, each
    on its own unloaded table handle and an unpickled plan, committed by the driver
    (`one_task`: every shard run by one task, as Spark may group them; `sweep`: whether
    the commit sweeps the instant for what other attempts left)."""
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
        task = "t0" if one_task else f"t{i}"
        shards.append(run_shard(Table(store, shipped.settings), shipped, part, task))
    commit_shards(txn, plan, shards, table=t, sweep=sweep)
    return txn.instant_time, counting


def _upserts() -> pa.Table:
    return pa.concat_tables(
        [_rows([1, 5, 42, 77], "d", ts=3), _rows([2], "old", ts=0), _rows([20001, 20003], "n")]
    )


@pytest.mark.unit
@pytest.mark.parametrize("small_files", [True, False])
def test_partition_shards_read_each_object_once_per_pass_list_nothing_as_the_python_path(
    tmp_path: Path, small_files: bool
) -> None:
    """An upsert over four partitions (updates, an older version that loses, new keys into
    small files or new file groups) run as one shard per partition: no task lists, no object
    is fetched more than twice in the write (a file for its keys, then for its rewrite:
    nothing is held between the two), the slices carry the task's name, and the table reads as
    the same upsert through `Table.upsert` on a twin table."""
    engine = _table(tmp_path / "engine", PROPS, small_files)
    python = _table(tmp_path / "python", PROPS, small_files)
    batch = _upserts()
    instant, counting = _engine_write(engine, PROPS, batch, "upsert")
    assert counting.lists == []
    assert counting.gets and max(counting.gets.values()) <= 2, counting.gets
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


@pytest.mark.unit
@pytest.mark.parametrize("props", [PROPS, GLOBAL_PROPS], ids=["partition", "global"])
def test_the_record_level_index_routes_the_shards_and_the_commit_records_its_delta(
    tmp_path: Path, props: KeyedProperties
) -> None:
    """With a record-level index built, the plan carries it, the shards look their keys up in
    it (new keys read no base file), and the commit names one delta of the keys it inserted,
    moved or deleted: after engine and one-process writes the index tracks every group and
    names every key as a rebuild from the files does; the rows are the one-process path's."""
    engine = _table(tmp_path / "engine", props, True)
    python = _table(tmp_path / "python", props, True)
    for t in (engine, python):
        build_index(t)
    fresh = _rows([30001, 30003, 30005], "n")
    instant, counting = _engine_write(engine, props, fresh, "upsert")
    assert counting.lists == [] and max(counting.gets.values(), default=0) <= 1, counting.gets
    entry = Table.open(engine.store).entry(instant)
    assert entry.metadata["keyed"]["files_read"] == 0  # the index says no file holds them
    assert entry.metadata["record_index_delta"]["rows"] == 3
    python.upsert(fresh)
    moved = _rows([1, 5, 6000, 30001], "m", ts=3, shift=1 if props is GLOBAL_PROPS else 0)
    _engine_write(engine, props, moved, "upsert")
    python.upsert(moved)
    gone = _rows([2, 7, 30003, 99999], "x").select(["id", "p"] if props is PROPS else ["id"])
    instant, _ = _engine_write(engine, props, gone, "delete")
    python.delete(gone)
    assert Table.open(engine.store).entry(instant).metadata["record_index_delta"]["rows"] == 3
    engine.upsert(_rows([30007, 3], "p", ts=5))  # the one-process writer after the engine's
    python.upsert(_rows([30007, 3], "p", ts=5))
    assert _strip(engine) == _strip(python)
    assert check_table(Table.open(engine.store)).problems == ()
    assert assert_index_matches_rebuild(Table.open(engine.store)) == frozenset()


@pytest.mark.unit
def test_shard_delta_parts_are_merged_into_one_delta_and_strays_swept(tmp_path: Path) -> None:
    """Shards of several partitions, run by one task, each write a part; the commit names one
    merged delta, and no part stays under the instant."""
    t = _table(tmp_path / "t", PROPS, False)
    build_index(t)
    batch = _rows([40001, 40003, 40005, 40007], "n")  # four partitions: four parts
    instant, _ = _engine_write(t, PROPS, batch, "upsert", one_task=True)
    entry = Table.open(t.store).entry(instant)
    delta = entry.metadata["record_index_delta"]
    assert delta["rows"] == 4 and delta["path"].endswith("/_record_index_delta.parquet")
    left = [o.key for o in t.store.list(f"data/{instant}/") if "_record_index_delta" in o.key]
    assert left == [delta["path"]]
    assert_index_matches_rebuild(Table.open(t.store))


@pytest.mark.unit
def test_shards_the_driver_wrote_itself_are_committed_without_a_listing(tmp_path: Path) -> None:
    """Shards written in this process (no task attempt that could have left an object) are
    committed without sweeping the instant: no LIST of its data folder, the parts merged
    into the one delta deleted by name, and the folder holds exactly what the commit
    names."""
    t = _table(tmp_path / "t", PROPS, False)
    build_index(t)
    batch = _rows([40001, 40003, 40005, 40007, 2, 5], "n", ts=9)  # new keys and updates
    listed: list[str] = []
    inner = t.store.list

    def counted(prefix: str = "", *a: Any, **k: Any) -> Any:
        listed.append(prefix)
        return inner(prefix, *a, **k)

    t.store.list = counted  # type: ignore[method-assign]
    instant, _ = _engine_write(t, PROPS, batch, "upsert", one_task=True, sweep=False)
    assert [p for p in listed if p.startswith("data/")] == []
    entry = Table.open(t.store).entry(instant)
    delta = entry.metadata["record_index_delta"]
    named = {f.path for f in entry.added} | {delta["path"]}
    named |= {s["bloom_path"] for s in entry.metadata["write_stats"] if s.get("bloom_path")}
    assert {o.key for o in inner(f"data/{instant}/")} == named
    assert check_table(Table.open(t.store)).problems == ()
    assert_index_matches_rebuild(Table.open(t.store))


@pytest.mark.unit
def test_the_driver_merges_the_deltas_once_due_as_after_a_python_commit(tmp_path: Path) -> None:
    """Past `record_index_max_deltas` the engine's commit runs `indexing` from the index, as
    the one-process writer does after its commit."""
    t = _table(tmp_path / "t", GLOBAL_PROPS, True)
    build_index(t)
    t = Table.open(t.store, replace(OFF, record_index_max_deltas=2))
    _engine_write(t, GLOBAL_PROPS, _rows([50001], "n"), "upsert")
    assert len(index_view(t.state()).deltas) == 1  # type: ignore[union-attr]
    _engine_write(t, GLOBAL_PROPS, _rows([50003], "n"), "upsert")
    view = index_view(Table.open(t.store).state())
    assert view is not None and view.deltas == ()
    assert_index_matches_rebuild(Table.open(t.store))
