"""What a keyed write holds at once does not grow with the table: bloom filters are probed a
window of files at a time, not all of the table's at once, and file groups are rewritten
within a budget of bytes in flight."""

from __future__ import annotations

import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.file_groups.sidecars import WRITE_STATS
from timeline.keyed import KeyedProperties, RangeBloomIndex
from timeline.keyed.index import ranges as index_mod
from timeline.keyed.index.bloom import BloomFilter
from timeline.keyed.index.ranges import write_stats_by_path
from timeline.keyed.inflight import bounded_map
from timeline.keyed.write import copy_on_write as write_mod

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts")
FILES = 6


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "ts": [1] * len(ids), "v": [f"v{i}" for i in ids]})


def _table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    """FILES files, each of an interleaved key range (every range holds every probe), every
    bloom filter in a sidecar object."""
    monkeypatch.setattr(index_mod, "INLINE_MAX_BYTES", 0)
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    t = Table.create(store, PROPS, TableSettings(small_file_limit=0, local_entry_cache=False))
    for k in range(FILES):
        t.insert(_rows(list(range(k, 600, FILES))))
    return t


def _index(t: Table) -> RangeBloomIndex:
    st = t.state()
    stats = [s for e in st.ordered_writes() for s in e.metadata.get(WRITE_STATS, ())]
    assert stats and all(s.get("bloom_path") for s in stats)
    return RangeBloomIndex(write_stats_by_path(st), t.store, integer_key="id")


def _count_live_filters(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Wraps the sidecar fetch: after each, how many fetched filters are still alive."""
    seen: list[weakref.ref[BloomFilter]] = []
    counts = {"fetched": 0, "most_alive": 0}
    fetch = RangeBloomIndex._sidecar

    def counted(self: RangeBloomIndex, *args: Any) -> BloomFilter:
        bf = fetch(self, *args)
        seen.append(weakref.ref(bf))
        counts["fetched"] += 1
        counts["most_alive"] = max(counts["most_alive"], sum(r() is not None for r in seen))
        return bf

    monkeypatch.setattr(RangeBloomIndex, "_sidecar", counted)
    return counts


def test_a_lookup_holds_a_window_of_sidecar_filters_not_the_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path, monkeypatch)
    probe = [str(k) for k in range(0, 600, 7)]
    expected = _index(t).candidates(t.files(), probe)  # every filter kept: the reference
    assert len(expected) == FILES

    monkeypatch.setattr(index_mod, "SIDECAR_PARALLELISM", 2)
    monkeypatch.setattr(index_mod, "SIDECAR_CACHE_BYTES", 0)
    counts = _count_live_filters(monkeypatch)
    assert _index(t).candidates(t.files(), probe) == expected
    assert counts["fetched"] == FILES
    assert counts["most_alive"] <= 2 * 2  # a window probed, the next one being fetched


def test_filters_that_fit_the_cache_are_fetched_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index asked twice in one write GETs each sidecar once while the filters fit
    `SIDECAR_CACHE_BYTES`."""
    t = _table(tmp_path, monkeypatch)
    counts = _count_live_filters(monkeypatch)
    index = _index(t)
    first = index.candidates(t.files(), ["5", "77"])
    assert index.candidates(t.files(), ["5", "77"]) == first
    assert counts["fetched"] == FILES
    holder = next(f.path for f in t.files() if f.column_stats["id"]["min"] == 5)
    assert first[holder] == [0, 1]  # both keys live in the file of ids 5, 11, 17, ...


def test_bounded_map_keeps_the_bytes_in_flight_within_the_budget() -> None:
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "alone": True}
    sizes = [30, 50, 20, 120, 10, 40, 40, 5]

    def run(size: int) -> int:
        with lock:
            state["now"] += size
            state["most"] = max(state["most"], state["now"] if size <= 100 else 0)
            if size > 100 and state["now"] != size:
                state["alone"] = False
        time.sleep(0.01)  # lets the others start, if the budget allows them
        with lock:
            state["now"] -= size
        return size * 2

    got = bounded_map(run, sizes, workers=4, budget=100, cost=lambda x: x)
    assert got == [x * 2 for x in sizes]  # in order
    assert state["most"] <= 100
    assert state["alone"]  # the item over the budget ran with nothing beside it


def test_bounded_map_raises_the_first_error_and_starts_nothing_after_it() -> None:
    started: list[int] = []

    def run(x: int) -> int:
        started.append(x)
        if x == 1:
            raise ValueError("boom")
        return x

    with pytest.raises(ValueError, match="boom"):
        bounded_map(run, list(range(6)), workers=2, budget=1, cost=lambda x: 1)
    assert started == [0, 1]  # the budget lets one run at a time: 2.. never started


def test_a_write_rewrites_at_most_the_inflight_bytes_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the budget below one file group's bytes, groups are rewritten one at a time,
    whatever `write_parallelism` says, and the table is the same."""
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    settings = TableSettings(small_file_limit=0, local_entry_cache=False, write_parallelism=4,
                             write_inflight_bytes=1)  # fmt: skip
    t = Table.create(store, PROPS, settings)
    for k in range(FILES):
        t.insert(_rows(list(range(k, 600, FILES))))
    lock = threading.Lock()
    state = {"now": 0, "most": 0}
    real = write_mod.write_group_at

    def counted(*args: Any, **kw: Any) -> Any:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        try:
            time.sleep(0.01)  # lets another rewrite start, if the budget allowed it
            return real(*args, **kw)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(write_mod, "write_group_at", counted)
    done = t.upsert(pa.table({"id": list(range(600)), "ts": [2] * 600, "v": ["u"] * 600}))
    assert len(t.entry(done.time).metadata[WRITE_STATS]) == FILES  # every group rewritten
    assert state["most"] == 1
    assert set(t.read().column("v").to_pylist()) == {"u"}
    with pytest.raises(ValueError, match="write_inflight_bytes"):
        TableSettings(write_inflight_bytes=0)
