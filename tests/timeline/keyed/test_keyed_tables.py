"""Keyed tables: properties, copy-on-write that touches only changed file groups, the
key-range/bloom index, small files, meta columns, conflicts and unreadable change ranges."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store, seal_json
from tests.support.store_calls import counted_calls
from timeline import CommitConflict, Table, TableSettings, TimelineError, make_keyed
from timeline.archive import Archiver
from timeline.errors import DuplicateKeys, RangeNotReadable
from timeline.keyed import (
    COMMIT_TIME_COL,
    RECORD_KEY_COL,
    KeyedProperties,
    KeyScope,
    MergeMode,
    OnDuplicate,
    PropertiesError,
    TableType,
)
from timeline.keyed.properties import FORMAT, PROPERTIES_KEY
from timeline.keyed.write import KeyedWriteRequest, write_keyed
from timeline.settings import ArchivalSettings

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts", merge_mode="event_time")
NO_SMALL = TableSettings(small_file_limit=0, local_entry_cache=False)


def _table(tmp_path: Path, props: KeyedProperties | None = PROPS, **kw: Any) -> Table:
    settings = TableSettings(**{"local_entry_cache": False, **kw})
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    return Table.create(store, props, settings)


def _rows(ids: list[int], ts: int = 1, v: str = "v") -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"{v}{i}" for i in ids]})


def _by_id(t: Table) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in t.read().to_pylist()}


def test_recreating_with_other_properties_is_refused_in_one_line(tmp_path: Path) -> None:
    t = _table(tmp_path)
    assert Table.create(t.store, PROPS).properties == PROPS  # same properties: a no-op
    other = KeyedProperties.of("id", merge_mode="commit_time")
    with pytest.raises(PropertiesError) as err:
        Table.create(t.store, other)
    assert "\n" not in str(err.value)
    assert "already exists with record key id" in str(err.value)
    assert "merge mode event_time" in str(err.value)


def test_creating_a_table_lists_it_once_for_the_open_and_once_for_the_commit(
    tmp_path: Path,
) -> None:
    """The keyed create decides from the listing the open just made (no second LIST of the
    timeline); the creation commit's own check of its instant time is the other LIST."""
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    calls = counted_calls(store)
    Table.create(store, PROPS)
    assert calls["list"] == 2, calls


def test_a_creator_that_comes_second_on_a_stale_listing_adds_no_creation_commit(
    tmp_path: Path,
) -> None:
    """Two handles opened on an empty table: the one that finds the properties written lists
    the timeline again before deciding, so the table keeps one creation commit."""
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    first, second = Table.open(store), Table.open(store)
    make_keyed(first, PROPS)
    make_keyed(second, PROPS)
    commits = Table.open(store).timeline().completed().write_timeline()
    assert [i.action for i in commits] == ["commit"]


def test_an_unkeyed_table_with_commits_cannot_become_keyed(tmp_path: Path) -> None:
    t = _table(tmp_path, None)
    t.write(pa.table({"id": [1]}))
    with pytest.raises(PropertiesError, match="already holds unkeyed commits"):
        Table.create(t.store, PROPS)
    assert t.properties is None and Table.open(t.store).properties is None


def test_invalid_properties(tmp_path: Path) -> None:
    with pytest.raises(PropertiesError, match="needs an ordering field"):
        KeyedProperties.of("id", merge_mode="event_time")
    with pytest.raises(PropertiesError, match="table type must be one of"):
        KeyedProperties.of("id", table_type="merge_on_write")
    with pytest.raises(PropertiesError, match="at least one record key"):
        KeyedProperties.of("")
    with pytest.raises(
        PropertiesError, match=r"^key scope must be one of global, partition, not 'table'$"
    ):
        KeyedProperties.of("id", key_scope="table")
    with pytest.raises(
        PropertiesError, match=r"^merge mode must be one of commit_time, event_time, not 'latest'$"
    ):
        KeyedProperties("id", merge_mode="latest")  # type: ignore[arg-type]


def test_table_options_are_enums_stored_by_their_names(tmp_path: Path) -> None:
    """Table type, merge mode and key scope are held as their `StrEnum` members (given by
    name, any case, or as members); the properties object stores the same names as
    before, plain strings, and reads back as the members."""
    props = KeyedProperties.of(
        "id", ordering_field="ts", merge_mode="EVENT_TIME", table_type=TableType.MERGE_ON_READ,
        key_scope=" partition",
    )  # fmt: skip
    assert props.merge_mode is MergeMode.EVENT_TIME and str(props.merge_mode) == "event_time"
    assert props.table_type is TableType.MERGE_ON_READ and props.key_scope is KeyScope.PARTITION
    stored = props.to_json()
    assert (stored["merge_mode"], stored["table_type"], stored["key_scope"]) == (
        "event_time", "merge_on_read", "partition",
    )  # fmt: skip
    assert all(type(stored[k]) is str for k in ("merge_mode", "table_type", "key_scope"))
    t = _table(tmp_path, props)
    again = Table.open(t.store).properties
    assert again == props and again is not None and again.table_type is TableType.MERGE_ON_READ
    assert [m.value for m in OnDuplicate] == ["fail", "drop"]


def test_stored_properties_with_an_unknown_name_are_refused_in_one_line(tmp_path: Path) -> None:
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    body = {**PROPS.to_json(), "table_type": "merge_on_write"}
    store.put(PROPERTIES_KEY, seal_json({"format": FORMAT, **body}))
    with pytest.raises(PropertiesError) as e:
        _ = Table.open(store).properties
    msg = str(e.value)
    assert "\n" not in msg and msg.endswith(
        "properties.json: table type must be one of copy_on_write, merge_on_read, "
        "not 'merge_on_write'"
    )


def test_an_insert_with_an_unknown_duplicate_policy_is_refused(tmp_path: Path) -> None:
    t = _table(tmp_path)
    before = set(t.state().writes)
    with pytest.raises(ValueError, match=r"^on_duplicate must be one of fail, drop, not 'keep'$"):
        t.insert(pa.table({"id": [1], "ts": [1]}), on_duplicate="keep")
    assert set(t.state().writes) == before  # nothing was begun


def test_unkeyed_tables_are_unchanged(tmp_path: Path) -> None:
    t = _table(tmp_path, None)
    t.write(pa.table({"id": [1, 1]}))
    assert t.read().column_names == ["id"]  # no meta columns, duplicates allowed as before
    assert t.read().num_rows == 2
    with pytest.raises(TimelineError, match="needs a keyed table"):
        t.upsert(pa.table({"id": [1]}))


def test_meta_columns_on_every_row(tmp_path: Path) -> None:
    t = _table(tmp_path)
    first = t.upsert(_rows([1, 2]))
    second = t.upsert(_rows([2], ts=2, v="new"))
    data = t.read()
    assert data.column_names[:2] == [COMMIT_TIME_COL, RECORD_KEY_COL]
    by = {r["id"]: r for r in data.to_pylist()}
    assert by[1][COMMIT_TIME_COL] == first.time  # untouched row keeps the instant that wrote it
    assert by[2][COMMIT_TIME_COL] == second.time
    assert by[2][RECORD_KEY_COL] == "2"


def test_upsert_rewrites_only_the_file_groups_holding_changed_keys(tmp_path: Path) -> None:
    t = _table(tmp_path, small_file_limit=0)
    for k in range(4):  # four file groups with disjoint key ranges
        t.upsert(_rows(list(range(10 * k, 10 * k + 10))))
    before = {f.group: f for f in t.files()}
    assert len(before) == 4
    done = t.upsert(_rows([13, 17], ts=5, v="u"))
    entry = t.entry(done.time)
    (added,) = entry.added
    assert added.group in before  # a new slice of the same file group
    (stats,) = entry.metadata["write_stats"]
    assert stats["prev_path"] == before[added.group].path
    assert (stats["inserts"], stats["updates"], stats["deletes"]) == (0, 2, 0)
    assert (stats["min_key"], stats["max_key"]) == ("10", "19")
    assert entry.metadata["keyed"]["files_read"] == 1  # key ranges pruned the other three
    assert {f.group for f in t.files()} == set(before)
    assert _by_id(t)[13]["v"] == "u13"


def test_bloom_filters_prune_files_whose_ranges_overlap(tmp_path: Path) -> None:
    t = _table(tmp_path, small_file_limit=0)
    t.upsert(_rows(list(range(0, 100, 2))))  # evens
    t.upsert(_rows(list(range(1, 100, 2))))  # odds: the same key range
    done = t.upsert(_rows([4], ts=3, v="u"))
    assert t.entry(done.time).metadata["keyed"]["files_read"] == 1


def test_new_keys_fill_small_files_then_new_groups(tmp_path: Path) -> None:
    t = _table(tmp_path)  # default small-file limit: one small file takes every insert
    t.upsert(_rows([1, 2]))
    (group,) = {f.group for f in t.files()}
    t.upsert(_rows([3, 4]))
    assert {f.group for f in t.files()} == {group}
    t2 = _table(tmp_path / "two", small_file_limit=0)
    t2.upsert(_rows([1, 2]))
    t2.upsert(_rows([3, 4]))
    assert len({f.group for f in t2.files()}) == 2


def test_a_small_file_takes_inserts_only_while_its_rewrite_stays_bounded(
    tmp_path: Path,
) -> None:
    t = _table(tmp_path)  # small_file_rewrite_ratio 1: rewrite at most what is added
    t.upsert(_rows(list(range(100))))
    (big,) = t.files()
    t.upsert(_rows(list(range(100, 110))))  # 10 records are not worth rewriting 100
    assert big in t.files() and len(t.files()) == 2
    (small,) = [f for f in t.files() if f != big]
    t.upsert(_rows(list(range(110, 120))))  # the 10-record file takes 10: it doubles
    assert big in t.files() and small not in t.files()
    assert {f.group for f in t.files()} == {big.group, small.group}
    assert sorted(f.rows for f in t.files()) == [20, 100]
    hudi = _table(tmp_path / "hudi", small_file_rewrite_ratio=float("inf"))
    for lo, hi in ((0, 100), (100, 110), (110, 120)):
        hudi.upsert(_rows(list(range(lo, hi))))
    assert [f.rows for f in hudi.files()] == [120]  # Hudi's rule: fill whatever it costs
    never = _table(tmp_path / "never", small_file_rewrite_ratio=0)
    never.upsert(_rows([1]))
    never.upsert(_rows([2]))
    assert len(never.files()) == 2


def test_a_group_rewritten_for_updates_takes_new_keys_whatever_its_size(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(list(range(100))))
    (group,) = {f.group for f in t.files()}
    done = t.upsert(_rows([5, 200, 201], ts=2, v="u"))  # one update, two new keys
    assert {f.group for f in t.files()} == {group}
    stats = t.entry(done.time).metadata["write_stats"]
    assert [(s["updates"], s["inserts"]) for s in stats] == [(1, 2)]


def test_new_keys_join_the_newest_group_the_write_rewrites(tmp_path: Path) -> None:
    t = _table(tmp_path, small_file_rewrite_ratio=0)  # every commit starts its own group
    t.upsert(_rows(list(range(10))))
    (old,) = {f.group for f in t.files()}
    t.upsert(_rows(list(range(10, 20))))
    (newest,) = {f.group for f in t.files()} - {old}
    done = t.upsert(_rows([5, 15, 20, 21], ts=2, v="u"))  # updates in both, two new keys
    stats = {s["file_group"]: s for s in t.entry(done.time).metadata["write_stats"]}
    assert (stats[old]["inserts"], stats[newest]["inserts"]) == (0, 2)
    assert stats[old]["max_key"] == "9"  # the older group's key range stays as it was


def test_duplicates_in_a_batch_and_ordering(tmp_path: Path) -> None:
    t = _table(tmp_path)
    batch = pa.table({"id": [1, 1, 1], "ts": [2, 3, 3], "v": ["a", "b", "c"]})
    t.upsert(batch)
    assert _by_id(t)[1]["v"] == "c"  # highest ts; the tie goes to the later row
    t.upsert(pa.table({"id": [1], "ts": [1], "v": ["older"]}))
    assert _by_id(t)[1]["v"] == "c"  # event_time: an older version does not win
    t.delete(pa.table({"id": [1], "ts": [2]}))
    assert 1 in _by_id(t)  # a delete older than the record loses
    t.delete(pa.table({"id": [1], "ts": [3]}))
    assert 1 not in _by_id(t)  # not older: it wins


def test_delete_missing_key_is_a_no_op_commit(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1]))
    files = t.files()
    done = t.delete([42])
    assert t.entry(done.time).added == ()
    assert t.files() == files


def test_delete_by_filter(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1, 2, 3]))
    t.delete(where="id >= 2 AND v <> 'v3'")
    assert sorted(_by_id(t)) == [1, 3]
    import pyarrow.compute as pc

    t.delete(where=pc.field("id") == 3)
    assert sorted(_by_id(t)) == [1]


def test_insert_refuses_existing_keys_unless_dropped(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.insert(_rows([1, 2]))
    seq = t.instants.latest_seq
    with pytest.raises(DuplicateKeys, match="2 key\\(s\\) already in the table"):
        t.insert(_rows([1, 2, 3]))
    assert t.refresh().max_seq == seq  # nothing committed
    t.insert(_rows([1, 3], v="new"), on_duplicate="drop")
    assert _by_id(t)[1]["v"] == "v1" and _by_id(t)[3]["v"] == "new3"


def test_global_key_moves_partition(tmp_path: Path) -> None:
    props = KeyedProperties.of("id", partition_by="p")
    t = _table(tmp_path, props)
    t.upsert(pa.table({"id": [1, 2], "p": ["a", "a"]}))
    t.upsert(pa.table({"id": [1], "p": ["b"]}))
    rows = sorted((r["id"], r["p"]) for r in t.read().to_pylist())
    assert rows == [(1, "b"), (2, "a")]
    partition = KeyedProperties.of("id", partition_by="p", key_scope="partition")
    t2 = _table(tmp_path / "p", partition)
    t2.upsert(pa.table({"id": [1], "p": ["a"]}))
    t2.upsert(pa.table({"id": [1], "p": ["b"]}))
    assert sorted((r["id"], r["p"]) for r in t2.read().to_pylist()) == [(1, "a"), (1, "b")]


def test_write_on_a_keyed_table_upserts_and_overwrites(tmp_path: Path) -> None:
    t = _table(tmp_path)
    Table.open(t.store).write(_rows([1, 2]))  # a fresh object learns keyedness from the schema
    Table.open(t.store).write(_rows([2], ts=2, v="u"))
    assert sorted(_by_id(t)) == [1, 2] and _by_id(t)[2]["v"] == "u2"
    Table.open(t.store).write(_rows([7]), mode="overwrite")
    assert sorted(_by_id(t)) == [7]
    assert t.changes(None, cdc=True).num_rows == 2 + 1 + 3  # i,i / u / d,d,i


def _upsert_while(t: Table, data: pa.Table, meanwhile: Callable[[], None]) -> Any:
    """An upsert whose planning is followed by `meanwhile` (another writer) before commit."""
    props = t.properties
    assert props is not None
    req = KeyedWriteRequest(props, "upsert", data=data, on_plan=lambda _plan: meanwhile())
    return write_keyed(t, req)


def test_conflicts_follow_file_groups(tmp_path: Path) -> None:
    t = _table(tmp_path, small_file_limit=0)
    t.upsert(_rows(list(range(10))))
    t.upsert(_rows(list(range(10, 20))))
    other = Table.open(t.store, NO_SMALL)
    won: list[str] = []
    # disjoint file groups: both land
    _upsert_while(t, _rows([1], ts=2), lambda: won.append(other.upsert(_rows([11], ts=2)).time))
    assert _by_id(t)[1]["ts"] == 2 and _by_id(t)[11]["ts"] == 2
    # the same file group: the later completion loses, naming the winner
    with pytest.raises(CommitConflict) as err:
        _upsert_while(t, _rows([2], ts=3), lambda: won.append(other.upsert(_rows([3], ts=3)).time))
    assert err.value.winner == won[-1]
    assert won[-1] in str(err.value)
    t.upsert(_rows([2], ts=3))  # a retry plans on the new slice and lands
    assert _by_id(t)[2]["ts"] == 3 and _by_id(t)[3]["ts"] == 3


def test_changes_refuse_cleaned_and_archived_ranges(tmp_path: Path) -> None:
    t = _table(
        tmp_path,
        cleaner_commits_retained=2,
        archival=ArchivalSettings(keep_min_commits=3, keep_max_commits=4, auto_archive=False),
    )
    times = [t.upsert(_rows([1], ts=k, v=f"v{k}")).time for k in range(6)]
    assert t.maintenance.clean() is not None
    with pytest.raises(RangeNotReadable) as err:
        t.changes(times[0], cdc=True)
    assert err.value.earliest and err.value.earliest in str(err.value)
    t.changes(err.value.earliest, cdc=True)  # from there on it reads


def test_changes_refuse_archived_ranges_unless_full_scan(tmp_path: Path) -> None:
    t = _table(tmp_path, archival=ArchivalSettings(auto_archive=False))
    times = [t.upsert(_rows([k % 2], ts=k, v=f"v{k}")).time for k in range(6)]
    Archiver(t, ArchivalSettings(keep_min_commits=3, keep_max_commits=4)).run()
    with pytest.raises(RangeNotReadable, match="was archived") as err:
        t.changes(times[0])
    assert err.value.earliest in str(err.value)
    got = t.changes(times[0], full_scan=True)  # the documented fallback
    assert sorted(got.column("v").to_pylist()) == ["v40", "v51"]
    with pytest.raises(ValueError, match="CDC needs every slice"):
        t.changes(times[0], cdc=True, full_scan=True)


def test_big_bloom_filters_live_in_checksummed_sidecars(tmp_path: Path) -> None:
    t = _table(
        tmp_path,
        small_file_limit=0,
        cleaner_policy="KEEP_LATEST_FILE_VERSIONS",
        cleaner_fileversions_retained=1,
    )
    t.upsert(_rows(list(range(0, 20000, 2))))  # 10k keys: a filter too big to sit inline
    t.upsert(_rows(list(range(1, 20000, 2))))  # the same key range: only blooms tell apart
    stats = [s for e in t.state().ordered_writes() for s in e.metadata.get("write_stats", ())]
    sidecar = stats[0]["bloom_path"]
    assert stats[0]["bloom"] is None and t.store.exists(sidecar)
    done = t.upsert(_rows([4], ts=3, v="u"))
    assert t.entry(done.time).metadata["keyed"]["files_read"] == 1
    assert t.maintenance.clean() is not None  # the superseded slice goes, and its sidecar with it
    assert not t.store.exists(sidecar)
    newest = t.entry(done.time).metadata["write_stats"][0]["bloom_path"]
    t.store.put(newest, t.store.get(newest)[:-1] + b"0")
    # A damaged filter is derived data: the write reads the file instead (with a warning).
    again = t.upsert(_rows([6], ts=3, v="w"))
    assert t.entry(again.time).metadata["keyed"]["files_read"] == 1
    assert _by_id(t)[6]["v"] == "w6" and len(_by_id(t)) == 20000


def test_integer_keys_are_ranged_as_numbers(tmp_path: Path) -> None:
    from timeline.keyed import RangeBloomIndex

    t = _table(tmp_path, small_file_limit=0)
    t.upsert(_rows(list(range(0, 100))))
    t.upsert(_rows(list(range(100, 200))))
    low, high = sorted(t.files(), key=lambda f: f.column_stats["id"]["min"])
    as_text = RangeBloomIndex({}, t.store)  # no bloom filters: ranges alone
    assert set(as_text.candidates([low, high], ["150"])) == {low.path, high.path}  # "150" < "99"
    as_numbers = RangeBloomIndex({}, t.store, integer_key="id")
    assert as_numbers.candidates([low, high], ["150", "7"]) == {high.path: [0], low.path: [1]}


def test_plain_files_are_refused_by_a_keyed_table(tmp_path: Path) -> None:
    """What an engine that commits files it wrote itself would do (e.g. a Spark writer)."""
    from timeline import check_schema
    from timeline.writes import put_table

    t = _table(tmp_path)
    t.upsert(_rows([1]))
    data = _rows([2])
    txn = t.begin()
    txn.schema = check_schema(t, data.schema)
    put_table(txn, "", data)
    with pytest.raises(TimelineError, match="is a keyed table"):
        txn.commit()
    assert sorted(_by_id(t)) == [1]
    assert not t.timeline().pending()  # aborted
