"""The copy-on-write writer's short paths: a delete by keys reads each file it touches once
and removes a key from every file holding it; keys beyond every file's key range are
dropped before the index sees them (a load of new keys reads no file); partition paths and
key ranges are computed over whole arrays."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from timeline import Table, TableSettings, WriteOperation
from timeline.keyed import KeyedProperties, RangeBloomIndex
from timeline.keyed.keys import partition_path_array, partition_paths
from timeline.keyed.write import KeyedWriteRequest, write_keyed

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts", merge_mode="event_time")


def _table(tmp_path: Path, props: KeyedProperties = PROPS, **kw: Any) -> Table:
    settings = TableSettings(**{"local_entry_cache": False, "small_file_limit": 0, **kw})
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    return Table.create(store, props, settings)


def _rows(ids: list[int], ts: int = 1) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}" for i in ids]})


def _ids(t: Table) -> list[int]:
    return sorted(t.read(columns=["id"]).column("id").to_pylist())


def _count_gets(t: Table, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    got: list[str] = []
    real = t.store.get

    def get(key: str, *args: Any, **kwargs: Any) -> Any:
        got.append(key)
        return real(key, *args, **kwargs)

    monkeypatch.setattr(t.store, "get", get)
    return got


def test_a_delete_by_keys_reads_each_file_it_rewrites_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(list(range(0, 50))))
    t.upsert(_rows(list(range(50, 100))))
    files = {f.path for f in t.files()}
    gets = _count_gets(t, monkeypatch)
    done = t.delete([3, 60, 61, 1000])
    data_gets = [k for k in gets if k in files]
    assert sorted(data_gets) == sorted(files)  # two files rewritten, each fetched once
    assert _ids(t) == [i for i in range(100) if i not in (3, 60, 61)]
    stats = t.entry(done.time).metadata["write_stats"]
    assert sorted(s["deletes"] for s in stats) == [1, 2]
    assert all(s["inserts"] == 0 and s["updates"] == 0 for s in stats)


@pytest.mark.parametrize("budget", [64 << 20, 0])
def test_an_upsert_reads_only_the_files_it_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """The small files an upsert finds its records in are fetched once: the locate step
    keeps their bytes for the rewrite, within `located_bytes_budget` (0: nothing is kept,
    each is fetched again for its rewrite); the untouched file is not read."""
    t = _table(tmp_path, located_bytes_budget=budget)
    for lo in (0, 50, 100):
        t.upsert(_rows(list(range(lo, lo + 50))))
    files = {f.path for f in t.files()}
    gets = _count_gets(t, monkeypatch)
    done = t.upsert(_rows([3, 60, 61, 1000], ts=2))
    stats = t.entry(done.time).metadata["write_stats"]
    rewritten = sorted(s["prev_path"] for s in stats if s["prev_path"])
    assert len(rewritten) == 2
    assert sorted(k for k in gets if k in files) == sorted(rewritten * (1 if budget else 2))
    data = t.read()
    assert data.num_rows == 151
    assert sorted(data.filter(pa.compute.equal(data.column("ts"), 2)).column("id").to_pylist()) == [
        3, 60, 61, 1000,
    ]  # fmt: skip


def test_an_upsert_keeps_located_files_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for one located file, one rewritten file is fetched once and the other
    twice (it did not fit)."""
    t = _table(tmp_path)
    for lo in (0, 50, 100):
        t.upsert(_rows(list(range(lo, lo + 50))))
    biggest = max(f.size for f in t.files())
    t = Table.open(t.store, replace(t.settings, located_bytes_budget=biggest + biggest // 2))
    files = {f.path for f in t.files()}
    gets = _count_gets(t, monkeypatch)
    done = t.upsert(_rows([3, 60], ts=2))
    rewritten = [s["prev_path"] for s in t.entry(done.time).metadata["write_stats"]]
    assert len(rewritten) == 2
    fetched = sorted(gets.count(p) for p in rewritten)
    assert fetched == [1, 2]
    assert not files - set(rewritten) & set(gets)  # the third file is not read


def test_a_delete_by_filter_reads_each_file_once_before_its_rewrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter is evaluated over every file, each fetched once; a file it selects rows of
    is fetched again for its rewrite (nothing is held between the two)."""
    t = _table(tmp_path)
    for lo in (0, 50, 100):
        t.upsert(_rows(list(range(lo, lo + 50))))
    files = {f.path for f in t.files()}
    gets = _count_gets(t, monkeypatch)
    done = t.delete(where="id IN (3, 60, 61)")
    stats = t.entry(done.time).metadata["write_stats"]
    rewritten = [s["prev_path"] for s in stats if s["prev_path"]]
    assert len(rewritten) == 2
    assert sorted(k for k in gets if k in files) == sorted([*files, *rewritten])
    assert _ids(t) == [i for i in range(150) if i not in (3, 60, 61)]


def test_a_delete_removes_a_key_from_every_file_holding_it(tmp_path: Path) -> None:
    """Two writers inserting one new key into new file groups both land; the key is then
    held twice, and deleting it leaves neither copy."""
    t = _table(tmp_path)
    t.upsert(_rows([1, 2]))
    other = Table.open(t.store, TableSettings(local_entry_cache=False, small_file_limit=0))
    insert = KeyedWriteRequest(
        PROPS, "insert", data=_rows([7]), on_plan=lambda _: other.insert(_rows([7]))
    )
    write_keyed(t, insert)
    assert _ids(t) == [1, 2, 7, 7]
    t.delete([7])
    assert _ids(t) == [1, 2]


def test_an_older_delete_keeps_the_record_under_event_time(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows([1, 2, 3], ts=5))
    t.delete(pa.table({"id": [1, 2], "ts": [4, 5]}))  # 1: older, loses; 2: a tie, wins
    assert _ids(t) == [1, 3]


def test_a_load_of_new_keys_reads_no_file_and_asks_the_index_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path)
    t.insert(_rows(list(range(0, 100))))
    asked: list[int] = []
    real = RangeBloomIndex.candidates

    def candidates(self: RangeBloomIndex, files: Any, keys: Any) -> Any:
        asked.append(len(keys))
        return real(self, files, keys)

    monkeypatch.setattr(RangeBloomIndex, "candidates", candidates)
    done = t.insert(_rows(list(range(100, 200))))
    assert asked == []
    assert t.entry(done.time).metadata["keyed"]["files_read"] == 0
    t.upsert(_rows([5, 150, 500], ts=2))  # keys inside a range still go to the index
    assert asked == [2]
    assert len(_ids(t)) == 201


def test_an_integer_keys_ranges_are_compared_on_its_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path, replace(PROPS, partition_by=("part",)))
    t.insert(_rows(list(range(0, 100))).append_column("part", pa.array(["a", "b"] * 50)))
    given: list[pa.DataType] = []
    real = RangeBloomIndex.in_some_range

    def in_some_range(self: RangeBloomIndex, files: Any, keys: Any) -> Any:
        given.append(keys.type)
        return real(self, files, keys)

    monkeypatch.setattr(RangeBloomIndex, "in_some_range", in_some_range)
    more = _rows([5, 150, 151, 500], ts=2).append_column("part", pa.array(["a", "b"] * 2))
    t.upsert(more)
    # The keys as the integer column holds them (per scope), not as text parsed back.
    assert given and set(given) == {pa.int64()}
    assert len(_ids(t)) == 103


def test_in_some_range_places_integer_and_text_keys() -> None:
    from timeline.metadata import DataFile

    def f(path: str, lo: Any, hi: Any) -> DataFile:
        return DataFile(path, 1, 1, "", path, {"id": {"min": lo, "max": hi}})

    files = [f("a", 0, 9), f("b", 5, 20), f("c", 100, 199)]
    as_numbers = RangeBloomIndex({}, None, integer_key="id")  # type: ignore[arg-type]
    keys = ["-1", "0", "20", "21", "99", "150", "200"]
    assert as_numbers.in_some_range(files, keys).tolist() == [
        False, True, True, False, False, True, False,
    ]  # fmt: skip
    assert as_numbers.in_some_range(files, pa.array(keys)).tolist() == (
        as_numbers.in_some_range(files, keys).tolist()
    )
    stats = {"a": {"min_key": "a", "max_key": "c"}, "b": {"min_key": "b", "max_key": "d"},
             "c": {"min_key": "x", "max_key": "y"}}  # fmt: skip
    as_text = RangeBloomIndex(stats, None)  # type: ignore[arg-type]
    got = as_text.in_some_range(files, ["a", "cz", "d", "da", "w", "xa", "z"]).tolist()
    assert got == [True, True, True, False, False, True, False]
    unranged = [*files, DataFile("d", 1, 5, "", "d")]  # a file with rows and no range
    assert as_text.in_some_range(unranged, ["z"]).tolist() == [True]


def test_partition_paths_over_arrays_match_the_unkeyed_naming() -> None:
    from timeline.partitioning import HIVE_NAMING, LEGACY_NAMING, partition_path

    data = pa.table({"a": ["x", None, "y/z", "x"], "b": [1, 2, None, 1]})
    rows = data.to_pylist()
    for cols in (["a"], ["a", "b"]):
        for naming in (HIVE_NAMING, LEGACY_NAMING):
            props = replace(KeyedProperties.of("id", partition_by=cols), partition_naming=naming)
            expected = [partition_path([(c, r[c]) for c in cols], naming=naming) for r in rows]
            assert partition_path_array(data, props).to_pylist() == expected
            assert partition_paths(data, props) == expected
    assert partition_paths(data, KeyedProperties.of("id")) == [""] * 4


def test_distinct_integer_keys_are_told_without_hashing_them_as_text(tmp_path: Path) -> None:
    from timeline.keyed.merge import distinct_integers

    assert distinct_integers(pa.array([1, 2, 3]))
    assert distinct_integers(pa.chunked_array([[5, 1], [3]]))
    assert not distinct_integers(pa.chunked_array([[5, 1], [5]]))
    t = _table(tmp_path)
    t.upsert(pa.table({"id": [3, 1, 3, 2], "ts": [1, 1, 2, 1], "v": ["a", "b", "c", "d"]}))
    assert {r["id"]: r["v"] for r in t.read().to_pylist()} == {1: "b", 2: "d", 3: "c"}


def test_a_write_request_states_one_operation_with_its_input() -> None:
    """A request is checked when it is made, before any instant begins."""
    with pytest.raises(ValueError, match="exactly one"):
        KeyedWriteRequest(PROPS, "delete", deletes=_rows([1]), where="id = 1")
    with pytest.raises(ValueError, match="takes data"):
        KeyedWriteRequest(PROPS, "upsert", deletes=_rows([1]))
    with pytest.raises(ValueError, match="must be one of upsert, insert, delete, not 'merge'"):
        KeyedWriteRequest(PROPS, "merge", data=_rows([1]))
    req = KeyedWriteRequest(replace(PROPS, table_type="merge_on_read"), "delete", where="id = 1")
    assert (
        req.merge_on_read and not KeyedWriteRequest(PROPS, "insert", data=_rows([1])).merge_on_read
    )


def test_a_write_operation_is_an_enum_named_by_its_string() -> None:
    """The operation is held typed; a request made with its name (any case) holds the same
    member, and the name is what commit metadata records."""
    req = KeyedWriteRequest(PROPS, " Upsert", data=_rows([1]))
    assert req.operation is WriteOperation.UPSERT and req.operation == "upsert"
    assert [op.value for op in WriteOperation] == ["upsert", "insert", "delete"]
    assert WriteOperation.parse("DELETE") is WriteOperation.DELETE


def test_a_keyed_commit_records_the_operations_name(tmp_path: Path) -> None:
    t = _table(tmp_path)
    done = t.upsert(_rows([1, 2]))
    entry = t.state().writes[done.time]
    assert entry.metadata["operation"] == "upsert"
    assert type(entry.metadata["operation"]) is str


def test_the_locate_step_holds_a_bounded_number_of_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate files read for their keys at once hold at most LOCATE_INFLIGHT_BYTES
    (a constant, not `write_inflight_bytes`): with room for one file, one is read at a
    time; the write is the same."""
    import threading
    import time

    from timeline.keyed.write import planner

    t = _table(tmp_path)
    for lo in range(0, 200, 50):
        t.upsert(_rows(list(range(lo, lo + 50))))
    monkeypatch.setattr(planner, "LOCATE_INFLIGHT_BYTES", min(f.size for f in t.files()))
    running, most = [0], [0]
    lock = threading.Lock()
    real = planner.Planner._stored_matches

    def counted(self: Any, *args: Any) -> Any:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.01)  # let other reads start, if they may
            return real(self, *args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(planner.Planner, "_stored_matches", counted)
    t.upsert(_rows([1, 51, 101, 151], ts=2))
    assert most[0] == 1
    assert _ids(t) == list(range(200))
