"""`lookup_keys`: the current rows of some record keys, read through the table's index. On
copy-on-write and merge-on-read tables, after updates, deletes and a compaction, it answers
as a full read filtered by key does, and fetches only the objects of the file slices the
index names (a key beyond every slice's key range: none at all)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from storage import StoreSettings, open_store
from tests.support.record_index import assert_index_matches_rebuild
from timeline import Table, TableSettings
from timeline.file_groups import logs_of
from timeline.keyed import KeyedProperties, PropertiesError, build_index, index_view, lookup_keys
from timeline.keyed.index import ranges
from timeline.keyed.keys import RECORD_KEY_COL
from timeline.keyed.read.lookup import candidate_slices

pytestmark = pytest.mark.unit

COW = KeyedProperties.of("id", ordering_field="ts")
MOR = KeyedProperties.of("id", ordering_field="ts", table_type="merge_on_read")
#: Each insert of new keys makes a file group of its own; compaction only when asked.
SETTINGS = TableSettings(compaction_mode="off", local_entry_cache=False, small_file_limit=0)


def _rows(ids: list[int], v: str, ts: int = 1) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [v] * len(ids)})


def _three_groups(tmp_path: Path, props: KeyedProperties, **kw: Any) -> tuple[Table, list[str]]:
    """A table of keys 0-49, 100-149 and 200-249, one file group each (in that order)."""
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    t = Table.create(store, props, replace(SETTINGS, **kw))
    groups = []
    for lo in (0, 100, 200):
        before = set(t.state().latest_slices())
        t.upsert(_rows(list(range(lo, lo + 50)), "x"))
        (g,) = set(t.state().latest_slices()) - before
        groups.append(g)
    return t, groups


class _Gets:
    """The keys a table's store fetched (data files, logs, index objects alike)."""

    def __init__(self, t: Table, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[str] = []
        inner = t.store.get

        def get(key: str, *a: Any, **k: Any) -> bytes:
            self.keys.append(key)
            return inner(key, *a, **k)

        monkeypatch.setattr(t.store, "get", get)


def _data_objects(t: Table, groups: list[str] | None = None) -> set[str]:
    """The objects (base files and logs) of the latest slices of `groups` (None: all)."""
    slices = t.state().latest_slices()
    return {o for g, sl in slices.items() if groups is None or g in groups for o in sl.objects()}


def _full_answer(t: Table, keys: list[str]) -> list[dict[str, Any]]:
    full = t.read()
    found = full.filter(pc.is_in(full.column(RECORD_KEY_COL), value_set=pa.array(keys)))
    return sorted(found.to_pylist(), key=lambda r: r["id"])


def _lookup(
    t: Table, gets: _Gets, keys: list[str], columns: list[str] | None = None
) -> tuple[list[dict[str, Any]], set[str]]:
    """The rows `lookup_keys` answers (by id) and the data objects it fetched."""
    every = _data_objects(t)
    gets.keys.clear()
    got = lookup_keys(t, keys, columns)
    return sorted(got.to_pylist(), key=lambda r: r["id"]), {k for k in gets.keys if k in every}


def _candidates(t: Table, keys: list[str]) -> set[str]:
    return {o for sl in candidate_slices(t, t.state(), keys) for o in sl.objects()}


def _check_keys(t: Table, gets: _Gets, groups: list[str]) -> None:
    """Updated, untouched, deleted, never-written and non-numeric keys, each looked up
    alone: the full read's answer, fetching the objects of the slices the index names and
    nothing else; for a stored key, only the slice holding it."""
    for key, group in (("120", 1), ("121", 1), ("7", 0), ("220", 2)):
        rows, read = _lookup(t, gets, [key])
        assert rows == _full_answer(t, [key]) and len(rows) == 1, key
        assert read == _data_objects(t, [groups[group]]) == _candidates(t, [key]), key
    rows, read = _lookup(t, gets, ["30"])  # deleted: its old slice at most (a bloom
    assert rows == []  # filter a delete kept, or a log's delete over the base holding it)
    assert read == _candidates(t, ["30"]) and read <= _data_objects(t, [groups[0]])
    for never in ("75", "999", "-1", "abc", "007"):
        rows, read = _lookup(t, gets, [never])
        assert rows == [] and read == set(), never
    keys = ["120", "7", "30", "999", "220"]
    rows, read = _lookup(t, gets, keys)
    assert rows == _full_answer(t, keys) and len(rows) == 3
    assert read == _data_objects(t)  # each group holds one of them


def _updates_and_deletes(t: Table) -> None:
    t.upsert(_rows([120, 220], "y", ts=2))
    t.upsert(_rows([121], "later", ts=0))
    t.delete([30])


@pytest.mark.parametrize("index", ["range_bloom", "record_level"])
def test_copy_on_write_reads_only_the_files_the_index_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: str
) -> None:
    t, groups = _three_groups(tmp_path, COW, keyed_index=index)
    if index == "record_level":
        build_index(t)  # the writes below then record their key changes as deltas
    _updates_and_deletes(t)
    gets = _Gets(t, monkeypatch)
    _check_keys(t, gets, groups)
    rows, _ = _lookup(t, gets, ["120"], columns=["v", "id"])
    assert rows == [{"v": "y", "id": 120}]
    assert lookup_keys(t, ["120"], ["v"]).column_names == ["v"]


def test_merge_on_read_merges_each_named_slice_with_its_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t, groups = _three_groups(tmp_path, MOR)
    _updates_and_deletes(t)
    assert all(_data_objects(t, [g]) != {t.state().latest_slices()[g].base.path} for g in groups)
    gets = _Gets(t, monkeypatch)
    _check_keys(t, gets, groups)
    assert _lookup(t, gets, ["120"], columns=["v", "id"])[0] == [{"v": "y", "id": 120}]

    t.maintenance.compact()  # every slice a base file of its own again
    assert all(_data_objects(t, [g]) == {t.state().latest_slices()[g].base.path} for g in groups)
    _check_keys(t, gets, groups)


def test_a_key_new_to_a_merge_on_read_table_inside_a_slices_key_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new key inside a slice's key range, written by a delta commit (to a new base file,
    or to that slice's log): only the slice holding it is read."""
    t, groups = _three_groups(tmp_path, MOR)
    before = set(t.state().latest_slices())
    t.upsert(pa.concat_tables([_rows([120], "y", ts=2), _rows([125], "n")]))
    holder = sorted(set(t.state().latest_slices()) - before) or [groups[1]]
    gets = _Gets(t, monkeypatch)
    rows, read = _lookup(t, gets, ["125"])
    assert rows == _full_answer(t, ["125"]) and len(rows) == 1
    assert read == _data_objects(t, holder) == _candidates(t, ["125"])


def test_an_empty_or_unkeyed_table(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/k", StoreSettings(fsync=False))
    empty = Table.create(store, COW, SETTINGS)
    assert lookup_keys(empty, ["1"]).num_rows == 0
    plain = Table.create(open_store(f"file://{tmp_path}/p", StoreSettings(fsync=False)))
    plain.write(_rows([1], "x"))
    with pytest.raises(PropertiesError, match="needs a keyed table"):
        lookup_keys(plain, ["1"])


def test_text_keys_scoped_by_partition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text keys (ranged as text), a key stored in two partitions: a row per partition,
    read from the two slices holding it; a key outside every range reads nothing."""
    props = KeyedProperties.of("id", partition_by="p", key_scope="partition")
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    t = Table.create(store, props, SETTINGS)
    for p in ("a", "b", "c"):
        ids = [f"k{i:03}" for i in range(50)] if p != "c" else ["z1", "z2"]
        t.upsert(pa.table({"id": ids, "p": [p] * len(ids), "v": [p] * len(ids)}))
    t.delete(pa.table({"id": ["k007"], "p": ["b"]}))
    by_part = {sl.partition[-1]: sl.group for sl in t.state().latest_slices().values()}
    gets = _Gets(t, monkeypatch)
    every = _data_objects(t)
    for key, parts in (("k003", "ab"), ("k007", "a"), ("z2", "c"), ("m1", "")):
        gets.keys.clear()
        got = lookup_keys(t, [key])
        read = {k for k in gets.keys if k in every}
        assert sorted(got.column("p").to_pylist()) == list(parts), key
        assert got.to_pylist() == [r for r in t.read().to_pylist() if r["id"] == key]
        ranged = {"k003": "ab", "k007": "ab", "z2": "c", "m1": ""}[key]
        assert read == _candidates(t, [key])  # the slices holding it, at most those ranged
        holding, ranging = ([by_part[p] for p in ps] for ps in (parts, ranged))
        assert _data_objects(t, holding) <= read <= _data_objects(t, ranging), key


def _interleaved(root: Path, index: str) -> tuple[Table, list[str]]:
    """A merge-on-read table of keys 0-299 in three file groups whose key ranges overlap
    (every third key each: ranges decide nothing), then logs in every group."""
    store = open_store(f"file://{root}", StoreSettings(fsync=False))
    t = Table.create(store, MOR, replace(SETTINGS, keyed_index=index))
    groups = []
    for first in (0, 1, 2):
        before = set(t.state().latest_slices())
        t.upsert(_rows(list(range(first, 300, 3)), "x"))
        (g,) = set(t.state().latest_slices()) - before
        groups.append(g)
    t.upsert(_rows([30, 31], "y", ts=2))
    t.delete([32])
    return t, groups


def _values(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows without their commit times (two tables written alike differ in those alone)."""
    return sorted((r["id"], r["ts"], r["v"], r[RECORD_KEY_COL]) for r in rows)


def test_merge_on_read_lookups_and_upserts_ask_the_record_level_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the record-level index built and current, a merge-on-read lookup and upsert ask
    it which file group holds each key (its shard is fetched) and read that group's slice,
    base and logs, and no other; a group a delta commit touched since falls back to ranges
    and blooms. The rows are those of the same table without the index."""
    plain, _ = _interleaved(tmp_path / "plain", "range_bloom")
    t, groups = _interleaved(tmp_path / "indexed", "record_level")
    build_index(t)
    gets = _Gets(t, monkeypatch)

    def shards() -> set[str]:
        view = index_view(t.state())
        assert view is not None  # built and current: delta commits make it fall back per group
        return {ref.path for ref in (*view.shards, *view.deltas)}

    for key, group in (("60", 0), ("31", 1), ("62", 2)):
        rows, read = _lookup(t, gets, [key])
        assert _values(rows) == _values(_full_answer(plain, [key])) and len(rows) == 1, key
        assert read == _data_objects(t, [groups[group]]), key  # base and logs of its group
        fetched_shards = set(gets.keys) & shards()
        assert fetched_shards, key  # the index was asked
        # each GET outside the timeline: an index shard or an object of the group, once each
        data_gets = [k for k in gets.keys if not k.startswith("_timeline/")]
        assert sorted(data_gets) == sorted(read | fetched_shards), key
    assert _lookup(t, gets, ["32"])[0] == []  # deleted in a log of its group

    slices = t.state().latest_slices()
    named = slices[groups[0]].objects() | slices[groups[1]].objects()  # may be read to decide
    index_objects = shards()
    gets.keys.clear()
    done = t.upsert(_rows([90, 91], "z", ts=3))  # keys of groups 0 and 1
    fetched = set(gets.keys)
    plain.upsert(_rows([90, 91], "z", ts=3))
    assert fetched & index_objects  # the keys were routed by the index
    assert not fetched & slices[groups[2]].objects()  # which ruled group 2 out
    assert {k for k in fetched if k.startswith("data/")} <= named | index_objects
    written = logs_of(t.state().writes[done.time].metadata)
    assert {lf.file_group for lf in written} == {groups[0], groups[1]}

    for key, group in (("90", 0), ("91", 1), ("62", 2)):  # 0 and 1 now through blooms
        rows, read = _lookup(t, gets, [key])
        assert _values(rows) == _values(_full_answer(plain, [key])) and len(rows) == 1, key
        assert read == _data_objects(t, [groups[group]]), key
    assert _values(t.read().to_pylist()) == _values(plain.read().to_pylist())


def test_merge_on_read_delta_commits_keep_the_record_level_index_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delta commit records its key changes in the record-level index as a copy-on-write
    commit does (new keys with their file group, deleted keys with none), so no group falls
    back to ranges and blooms: a lookup of a key it inserted fetches index objects and that
    key's group alone, and the index names what a rebuild from the files names."""
    t, groups = _three_groups(tmp_path, MOR, keyed_index="record_level")
    build_index(t)
    new = list(range(300, 320))
    t.upsert(pa.concat_tables([_rows(new, "n"), _rows([10], "u", ts=2)]))  # inserts, update
    t.delete([110])
    view = index_view(t.state())
    assert view is not None and len(view.deltas) == 2
    assert view.untracked == frozenset()  # every group the delta commits touched is tracked
    (added,) = set(t.state().latest_slices()) - set(groups)  # the new keys' file group
    index_objects = {ref.path for ref in (*view.shards, *view.deltas)}
    cases = (("305", added), ("10", groups[0]), ("120", groups[1]))
    expected = {key: _full_answer(t, [key]) for key, _ in cases}

    gets = _Gets(t, monkeypatch)
    for key, group in cases:
        rows, read = _lookup(t, gets, [key])
        assert rows == expected[key] and len(rows) == 1, key
        assert read == _data_objects(t, [group]), key  # its group's base and logs, no other
        data_gets = [k for k in gets.keys if not k.startswith("_timeline/")]
        assert set(data_gets) - read <= index_objects, key  # else only index objects
        assert len(data_gets) == len(set(data_gets)), key  # each fetched once
    assert _lookup(t, gets, ["110"])[0] == []  # deleted by the second delta commit
    assert assert_index_matches_rebuild(t) == frozenset()


def test_merge_on_read_updates_placed_by_the_record_level_index_fetch_no_base_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delta commit whose keys the record-level index placed writes its blocks without the
    bloom filters of their groups' bases (sidecars here): every key it upserts was already
    in its group, so none is beyond the base. Without the index, ranges and blooms route
    the keys and read those filters."""
    monkeypatch.setattr(ranges, "INLINE_MAX_BYTES", 0)  # every filter a sidecar object
    t, _ = _three_groups(tmp_path, MOR, keyed_index="record_level")
    build_index(t)
    gets = _Gets(t, monkeypatch)
    t.upsert(_rows([10, 110], "u", ts=2))
    assert not [k for k in gets.keys if k.endswith(".bloom")]
    assert any(k.endswith(".parquet") and "_record_index" in k for k in gets.keys)
    got = {r["id"]: r["v"] for r in t.read().to_pylist()}
    assert (got[10], got[110], got[11]) == ("u", "u", "x") and len(got) == 150
    assert assert_index_matches_rebuild(t) == frozenset()
    plain, _ = _three_groups(tmp_path / "plain", MOR)  # ranges and blooms route the keys
    gets = _Gets(plain, monkeypatch)
    plain.upsert(_rows([10, 110], "u", ts=2))
    assert [k for k in gets.keys if k.endswith(".bloom")]
