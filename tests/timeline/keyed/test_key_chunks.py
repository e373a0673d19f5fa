"""The locate step reads a big file's key (and ordering) column chunks by ranged GETs, skips
row groups whose key statistics cannot hold a probed key, and still refuses a damaged file
with an error naming it. The size threshold is lowered so that small files are big."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import IntegrityError, LocalObjectStore, StoreSettings, open_store
from timeline import Table, TableSettings, describe_bytes
from timeline.keyed import KeyedProperties
from timeline.keyed.keys import RECORD_KEY_COL
from timeline.keyed.write import KeyedWriteRequest, WriteOperation, key_chunks, write_keyed
from timeline.keyed.write.key_chunks import chunk_span, matching_rows
from timeline.keyed.write.planner import Planner

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("ranged_reads")]

KEY = RECORD_KEY_COL
PROPS = KeyedProperties.of("id", ordering_field="ts")


def _ranges(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int | None]]:
    """Every `get` of `store` as (key, start, length)."""
    got: list[tuple[str, int, int | None]] = []
    real = store.get

    def get(key: str, start: int = 0, length: int | None = None) -> bytes:
        got.append((key, start, length))
        return bytes(real(key, start, length))

    monkeypatch.setattr(store, "get", get)
    return got


def _file(store: LocalObjectStore, rows: int = 20_000, group: int = 1_000) -> tuple[Any, bytes]:
    """A stored file of `rows` keys k00000.. in order, wide values after the key, in row
    groups of `group` rows."""
    data = pa.table(
        {
            KEY: [f"k{i:05d}" for i in range(rows)],
            "ts": list(range(rows)),
            "v": [f"value-{i:08d}" * 8 for i in range(rows)],
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, row_group_size=group)
    body = sink.getvalue().to_pybytes()
    store.put("f.parquet", body)
    return describe_bytes("f.parquet", body), body


def test_only_the_key_chunks_of_row_groups_that_may_hold_a_key_are_fetched(
    local_store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(key_chunks, "COALESCE_GAP", 0)  # this file's row groups are small
    store = local_store
    f, _ = _file(store)
    md = pq.ParquetFile(store.url(f.path).removeprefix("file://")).metadata
    gets = _ranges(store, monkeypatch)
    keys = pa.array(["k00005", "k00007", "k03500", "k19999", "zzz"])
    m = matching_rows(store, f, [KEY, "ts"], keys)
    assert m.rows.tolist() == [5, 7, 3500, 19999]
    assert m.data is not None and m.data.column("ts").to_pylist() == [5, 7, 3500, 19999]
    assert (m.row_groups_read, m.row_groups_skipped) == (3, 17)
    # the tail, then one GET per row group read: its key and ts chunks, coalesced
    assert all(length is not None for _, _, length in gets), "no whole-file GET"
    tail, *chunks = gets
    assert tail[1] + (tail[2] or 0) == f.size
    allowed = [
        (chunk_span(md, rg, 0)[0], chunk_span(md, rg, 1)[1]) for rg in (0, 3, 19)
    ]  # key chunk through ts chunk of each row group read
    assert [(s, s + (n or 0)) for _, s, n in chunks] == allowed
    value_bytes = sum(md.row_group(rg).column(2).total_compressed_size for rg in range(20))
    assert sum(n or 0 for _, _, n in chunks) < value_bytes / 5  # the wide column stays


def test_chunks_close_to_each_other_are_fetched_by_one_get(
    local_store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = local_store
    f, body = _file(store)
    md = pq.ParquetFile(pa.BufferReader(body)).metadata
    gets = _ranges(store, monkeypatch)
    m = matching_rows(store, f, [KEY], pa.array(["k00005", "k03500"]))
    assert m.rows.tolist() == [5, 3500]
    # row groups 0 and 3 lie within COALESCE_GAP: one GET from the first key chunk to the last
    assert [(s, n) for _, s, n in gets[1:]] == [
        (chunk_span(md, 0, 0)[0], chunk_span(md, 3, 0)[1] - chunk_span(md, 0, 0)[0])
    ]


def test_a_file_without_a_probed_key_in_range_is_read_for_its_footer_alone(
    local_store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = local_store
    f, _ = _file(store)
    gets = _ranges(store, monkeypatch)
    m = matching_rows(store, f, [KEY], pa.array(["a", "zz"]))
    assert m.data is None and len(m.rows) == 0 and m.row_groups_skipped == 20
    assert len(gets) == 1


def test_a_damaged_key_chunk_raises_an_error_naming_the_object(
    local_store: LocalObjectStore, tmp_path: Path
) -> None:
    store = local_store
    f, body = _file(store)
    md = pq.ParquetFile(pa.BufferReader(body)).metadata
    start, end = chunk_span(md, 2, 0)
    damaged = body[:start] + b"\x00" * (end - start) + body[end:]
    (tmp_path / "s" / "f.parquet").write_bytes(damaged)
    with pytest.raises(IntegrityError, match=r"f\.parquet"):
        matching_rows(store, f, [KEY], pa.array(["k02500"]))


def test_a_damaged_footer_raises_an_error_naming_the_object(
    local_store: LocalObjectStore, tmp_path: Path
) -> None:
    store = local_store
    f, body = _file(store)
    (tmp_path / "s" / "f.parquet").write_bytes(body[:-12] + b"\xff" * 8 + body[-4:])
    with pytest.raises(IntegrityError, match=r"f\.parquet"):
        matching_rows(store, f, [KEY], pa.array(["k02500"]))


def _table(tmp_path: Path) -> Table:
    settings = TableSettings(
        local_entry_cache=False, small_file_limit=0, parquet_row_group_rows=500
    )
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    return Table.create(store, PROPS, settings)


def _rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}" * 20 for i in ids]})


def test_an_upsert_locates_by_key_chunks_and_rewrites_the_file_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path)
    ids = list(range(1000, 9000))
    t.upsert(_rows(ids, 1))
    t.upsert(_rows([1000], 2))  # rewritten: a slice of row groups of 500 rows
    (f,) = t.files()
    plans: list[Planner] = []
    gets = _ranges(t.store, monkeypatch)
    req = KeyedWriteRequest(PROPS, WriteOperation.UPSERT, data=_rows([1001, 1002, 99999], 3),
                            on_plan=plans.append)  # fmt: skip
    write_keyed(t, req)
    (plan,) = plans
    # 16 row groups; the updated key 1000 moved to the last one (its range is now 1000-8999)
    assert plan.row_groups_read == 2 and plan.row_groups_skipped == 14
    assert all(n is not None for k, _, n in gets if k == f.path), "no whole-file GET"
    got = t.read().sort_by("id")
    assert got.num_rows == 8001
    assert got.filter(pa.compute.equal(got.column("ts"), 3)).column("id").to_pylist() == [
        1001, 1002, 99999,
    ]  # fmt: skip


def test_a_damaged_file_fails_the_upsert_naming_it_and_commits_nothing(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(list(range(1000, 9000)), 1))
    t.upsert(_rows([1000], 2))
    (f,) = t.files()
    path = Path(t.store.url(f.path).removeprefix("file://"))
    body = path.read_bytes()
    md = pq.ParquetFile(pa.BufferReader(body)).metadata
    names = md.schema.to_arrow_schema().names
    start, end = chunk_span(md, 0, names.index(KEY))
    path.write_bytes(body[:start] + b"\x00" * (end - start) + body[end:])
    before = len(t.timeline().completed())
    with pytest.raises(IntegrityError, match=re.escape(f.path)):
        t.upsert(_rows([1001], 3))
    assert len(t.timeline().completed()) == before
