"""Merge-on-read writes that read no slice: keys routed by the index (base and log key
ranges and blooms), the event_time merge mode applied by the reader, compaction and the
change reads; new keys living in logs and found again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import ObjectStore, StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.file_groups.log_files import LOG_FILES
from timeline.keyed import KeyedProperties
from timeline.keyed.index.ranges import (
    IndexFactory,
    KeyIndex,
    RangeBloomIndex,
    range_bloom_index,
    write_stats_by_path,
)
from timeline.keyed.write import KeyedWriteRequest, write_keyed
from timeline.snapshot import TableState

PROPS = KeyedProperties.of(
    "id",
    ordering_field="ts",
    partition_by="p",
    merge_mode="event_time",
    table_type="merge_on_read",
)
OFF = TableSettings(compaction_mode="off", local_entry_cache=False)


def _ranges_only(store: ObjectStore, st: TableState, props: KeyedProperties) -> KeyIndex:
    """The range and bloom index with its blooms left out: a new key inside a file group's
    key range then has that group as its one candidate and goes into its log (as a bloom
    false positive sends it)."""
    index = range_bloom_index(store, st, props)
    assert isinstance(index, RangeBloomIndex)
    index.stats = {p: {k: v for k, v in s.items() if k != "bloom"} for p, s in index.stats.items()}
    return index


def _table(tmp_path: Path, settings: TableSettings = OFF) -> Table:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    return Table.create(store, PROPS, settings)


def _rows(ids: list[int], v: str, ts: int) -> pa.Table:
    n = len(ids)
    return pa.table({"id": ids, "ts": [ts] * n, "p": ["a"] * n, "v": [v] * n})


def _values(data: pa.Table) -> dict[int, str]:
    return dict(zip(data.column("id").to_pylist(), data.column("v").to_pylist(), strict=True))


def _upsert(t: Table, data: pa.Table, index: IndexFactory | None = None) -> tuple[Any, int]:
    """A delta commit and how many slices its planning read."""
    read: list[int] = []
    req = KeyedWriteRequest(
        PROPS, "upsert", data=data, on_plan=lambda p: read.append(p.files_read), index=index
    )
    done = write_keyed(t, req)
    return done, read[0]


@pytest.mark.unit
def test_an_upsert_reads_no_slice_and_readers_apply_event_time(tmp_path: Path) -> None:
    t = _table(tmp_path)
    first = t.upsert(_rows(list(range(1, 21)), "x", 5))
    late = pa.concat_tables([_rows([1, 2], "older", 3), _rows([3], "newer", 7)])
    _, read = _upsert(t, late)
    assert read == 0  # routed by range and bloom alone
    assert _values(t.read()) == {**{i: "x" for i in range(1, 21)}, 3: "newer"}
    assert _values(t.read(columns=["id", "v"])) == _values(t.read())  # ts fetched to merge
    assert _values(t.read(as_of=first.time)) == {i: "x" for i in range(1, 21)}
    cdc = t.changes(first.time, cdc=True).to_pylist()
    assert [(c["record_key"], c["op"]) for c in cdc] == [("3", "u")]  # the losers changed nothing
    assert _values(t.changes(first.time)) == {3: "newer"}
    # a delete older than the stored record loses (Hudi's rule), by keys alone it wins
    t.delete(pa.table({"id": [3, 4], "ts": [6, 5], "p": ["a", "a"]}))
    assert 3 in _values(t.read()) and 4 not in _values(t.read())
    t.delete([3])
    assert 3 not in _values(t.read())
    # an upsert after a delete inserts whatever its ordering value
    _upsert(t, _rows([3], "back", 0))
    assert _values(t.read())[3] == "back"
    expected = _values(t.read())
    t.maintenance.compact()
    assert _values(t.read(read_optimized=True)) == expected == _values(t.read())


@pytest.mark.unit
def test_a_new_key_inside_a_group_lives_in_its_log_and_is_found_again(tmp_path: Path) -> None:
    t = _table(tmp_path)
    first = t.upsert(_rows([1, 3, 7, 9], "x", 1))
    done, read = _upsert(t, _rows([5], "new", 1), _ranges_only)
    e = t.entry(done.time)
    assert read == 0 and not e.added  # into the log of the group whose range holds it
    (log,) = e.metadata[LOG_FILES]
    assert (log["min_key"], log["key_min"], log["key_max"]) == ("5", 5, 5)
    # the base's recorded bloom does not name 5 (the writer's index left blooms out): the
    # log's own entry does, for every later lookup
    beyond = log["beyond_base"]
    assert (beyond["min_key"], beyond["key_min"], beyond["key_max"]) == ("5", 5, 5)
    assert beyond["bloom"] and log["base"] == t.state().snapshot().files[0].path
    assert _values(t.read()) == {1: "x", 3: "x", 5: "new", 7: "x", 9: "x"}
    cdc = t.changes(first.time, cdc=True).to_pylist()
    assert [(c["record_key"], c["op"]) for c in cdc] == [("5", "i")]
    again, read = _upsert(t, _rows([5], "again", 2))  # found through the log's entry
    (log,) = t.entry(again.time).metadata[LOG_FILES]
    assert read == 0 and log["beyond_base"]["key_min"] == 5  # still beyond the base
    assert _values(t.read())[5] == "again" and t.read().num_rows == 5
    t.delete([5])
    assert 5 not in _values(t.read())
    t.maintenance.compact()
    assert _values(t.read()) == {1: "x", 3: "x", 7: "x", 9: "x"}


@pytest.mark.unit
def test_a_key_in_a_log_the_compacted_base_never_saw_is_not_inserted_twice(
    tmp_path: Path,
) -> None:
    """A delta commit completing while a compaction runs attaches its log to the compacted
    base, whose bloom filter was built without that log's keys: the log's own range and
    bloom keep such a key findable."""
    t = _table(tmp_path)
    t.upsert(_rows([1, 3, 7, 9], "x", 1))
    _upsert(t, _rows([1], "y", 1))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    _, read = _upsert(t, _rows([5], "in-log", 1), _ranges_only)  # a false positive's path
    assert t.maintenance.run_compaction() == [planned]
    done, read = _upsert(t, _rows([5], "updated", 2))  # the new base's bloom lacks 5
    assert read == 0 and not t.entry(done.time).added  # found in the log, not inserted anew
    data = t.read()
    assert data.num_rows == 5 and _values(data)[5] == "updated"


@pytest.mark.unit
def test_logs_of_keys_their_base_names_add_nothing_for_the_index_to_probe(
    tmp_path: Path,
) -> None:
    """Updates of stored keys are named by their base file's range and bloom already: their
    logs record the base and the range of their keys but no filter, so later writes probe
    one filter per file group however many delta commits came before."""
    t = _table(tmp_path)
    t.upsert(_rows(list(range(1, 41)), "x", 1))
    base = t.state().snapshot().files[0].path
    probed: list[int] = []
    for i in range(2, 6):
        req = KeyedWriteRequest(
            PROPS,
            "upsert",
            data=_rows([i, 10 + i, 20 + i], f"v{i}", i),
            on_plan=lambda p: probed.append(sum(len(v) for v in p.index.logs.values())),
        )
        done = write_keyed(t, req)
        (log,) = t.entry(done.time).metadata[LOG_FILES]
        assert log["base"] == base and "beyond_base" not in log and "bloom" not in log
        assert (log["key_min"], log["key_max"]) == (i, 20 + i)
    assert probed == [0, 0, 0, 0]
    assert _values(t.read()) == {
        **{k: "x" for k in range(1, 41)},
        **{k: f"v{i}" for i in range(2, 6) for k in (i, 10 + i, 20 + i)},
    }


@pytest.mark.unit
def test_random_updates_of_global_keys_over_overlapping_ranges_read_no_slice(
    tmp_path: Path,
) -> None:
    """Keys partitioned by something else than their order give every file of a load the
    same key range, so each key is probed against the filters of all of them: at the
    default false-positive rate a random update batch still has one candidate per key."""
    props = KeyedProperties.of(
        "id", ordering_field="ts", partition_by="p", merge_mode="event_time",
        table_type="merge_on_read", key_scope="global",
    )  # fmt: skip
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    t = Table.create(store, props, OFF)
    ids = list(range(20_000))
    t.upsert(pa.table({"id": ids, "ts": [1] * len(ids), "p": [f"p{i % 20}" for i in ids]}))
    assert len(t.state().snapshot().files) == 20  # one key range, twenty filters
    picked = ids[7::10]
    batch = pa.table({"id": picked, "ts": [2] * len(picked), "p": [f"p{i % 20}" for i in picked]})
    read: list[int] = []
    req = KeyedWriteRequest(
        props, "upsert", data=batch, on_plan=lambda p: read.append(p.files_read)
    )
    done = write_keyed(t, req)
    assert read == [0] and not t.entry(done.time).added
    data = t.read()
    assert data.num_rows == len(ids)
    assert (
        sorted(data.filter(pa.compute.equal(data.column("ts"), 2)).column("id").to_pylist())
        == picked
    )


def _bloom_bits_per_key(t: Table, keys: int) -> float:
    (stats,) = write_stats_by_path(t.state()).values()
    return int(stats["bloom"]["num_bits"]) / keys


@pytest.mark.unit
def test_filters_default_to_a_tight_rate_on_merge_on_read_and_a_loose_one_on_copy_on_write(
    tmp_path: Path,
) -> None:
    """A false candidate costs a merge-on-read write a slice read, and copy-on-write a read
    of a file it mostly rewrites anyway while bigger filters slow every rewrite: the
    default rate follows the table type, and an explicit `bloom_index_fpp` applies to both."""
    data = pa.table({"id": list(range(500)), "ts": [1] * 500, "p": ["a"] * 500})
    bits = {}
    for name, kind, settings in [
        ("mor", "merge_on_read", OFF),
        ("cow", "copy_on_write", OFF),
        ("cow-tight", "copy_on_write", TableSettings(compaction_mode="off", bloom_index_fpp=1e-6)),
    ]:
        props = KeyedProperties.of("id", ordering_field="ts", partition_by="p", table_type=kind)
        store = open_store(f"file://{tmp_path}/{name}", StoreSettings(fsync=False))
        t = Table.create(store, props, settings)
        t.upsert(data)
        bits[name] = _bloom_bits_per_key(t, 500)
    assert 27 < bits["mor"] < 31 and 27 < bits["cow-tight"] < 31  # 1e-6: ~28.8 bits a key
    assert 11.5 < bits["cow"] < 12.5  # 0.01: 12 bits a key in the blocked layout (bloom.py)
    assert OFF.bloom_fpp(merge_on_read=True) == 1e-6 and OFF.bloom_fpp(False) == 0.01
    with pytest.raises(ValueError, match="bloom_index_fpp"):
        TableSettings(bloom_index_fpp=1.0)
