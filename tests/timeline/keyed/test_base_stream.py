"""A rewrite's base file read by ranged GETs a few row groups at a time: the same rows as a
whole read, every byte checked against the recorded checksum, and a damaged file refused
before the rewrite's slice is committed. The size thresholds are lowered so that small
files stream."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import IntegrityError, LocalObjectStore
from timeline import Table, TableSettings, describe_bytes
from timeline.keyed import KeyedProperties
from timeline.keyed.write.base_stream import base_row_groups

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("ranged_reads")]

PROPS = KeyedProperties.of("id", ordering_field="ts")


def _rows(ids: range, ts: int) -> pa.Table:
    return pa.table({"id": list(ids), "ts": [ts] * len(ids), "v": [f"value-{i:08d}" for i in ids]})


@pytest.mark.parametrize("page_index", [False, True])
def test_the_row_groups_are_those_of_the_file_read_in_pieces(
    local_store: LocalObjectStore, page_index: bool
) -> None:
    store = local_store
    sink = pa.BufferOutputStream()
    data = _rows(range(20_000), 1)
    # A page index lies between the last row group and the footer: its bytes are checked too.
    pq.write_table(data, sink, row_group_size=1_000, write_page_index=page_index)
    body = sink.getvalue().to_pybytes()
    store.put("f.parquet", body)
    f = describe_bytes("f.parquet", body)
    store.stats.reset()
    groups = list(base_row_groups(store, f))
    assert [g.num_rows for g in groups] == [1_000] * 20
    assert pa.concat_tables(groups) == data
    gets = store.stats.snapshot()["GET"]
    assert 3 <= gets < 20, "pieces of several row groups, and the tail"


def test_a_damaged_file_is_refused_after_its_last_row_group(
    local_store: LocalObjectStore, tmp_path: Path
) -> None:
    store = local_store
    sink = pa.BufferOutputStream()
    pq.write_table(_rows(range(5_000), 1), sink, row_group_size=1_000, compression="none")
    body = bytearray(sink.getvalue().to_pybytes())
    f = describe_bytes("f.parquet", bytes(body))
    at = body.index(b"value-00002500")
    body[at + 13] ^= 1  # a value changes, the file still decodes
    store.put("f.parquet", bytes(body))
    with pytest.raises(IntegrityError, match="corrupt"):
        list(base_row_groups(store, f))


def test_an_upsert_whose_base_file_is_damaged_commits_nothing(
    local_store: LocalObjectStore, tmp_path: Path
) -> None:
    # Nothing kept from the locate step: the rewrite streams the base file.
    settings = TableSettings(local_entry_cache=False, parquet_row_group_rows=1_000,
                             write_inflight_bytes=1, small_file_rewrite_ratio=1_000.0)  # fmt: skip
    store = local_store
    t = Table.create(store, PROPS, settings)
    t.insert(_rows(range(5_000), 1))
    t.upsert(_rows(range(0, 5_000, 7), 2))  # streams an intact base file
    got = {r["id"]: r["ts"] for r in t.read(columns=["id", "ts"]).to_pylist()}
    assert got == {i: 1 for i in range(5_000)} | {i: 2 for i in range(0, 5_000, 7)}
    (f,) = t.snapshot().files
    path = store.root / f.path
    body = bytearray(path.read_bytes())
    body[len(body) // 2] ^= 0xFF
    path.write_bytes(bytes(body))
    before = t.snapshot().files
    with pytest.raises(IntegrityError):  # new keys only: the small file is rewritten unread
        t.upsert(_rows(range(5_000, 5_100), 3))
    assert Table.open(store, settings).snapshot().files == before
