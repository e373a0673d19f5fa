"""A copy-on-write rewrite of a file of many row groups holds about one row group decoded in
Arrow's memory pool (its bytes counted by a pool of its own), whatever the file's size:
the base file is decoded a piece of a row group at a time and each piece filtered as it
comes. The rows written are those kept, in the order of the file, and a damaged base file
is refused by name, its slice never committed."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import IntegrityError, LocalObjectStore
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties
from timeline.keyed.write import base_stream, slice_writer

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts")
GROUP_ROWS = 4_000
GROUPS = 12
ROWS = GROUP_ROWS * GROUPS
#: Pools a test counted with that still held a buffer when it ended: kept alive, as a buffer
#: freed after its pool would crash the process.
_HELD_POOLS: list[pa.MemoryPool] = []


def _rows(ids: np.ndarray, ts: int) -> pa.Table:
    rng = np.random.default_rng(ts)
    pad = rng.integers(0, 1 << 62, size=(len(ids), 24)).astype("<u8").view("S192").ravel()
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "ts": pa.array(np.full(len(ids), ts, np.int64)),
         "pad": pa.array(pad, pa.binary())}
    )  # fmt: skip


@pytest.fixture
def table(local_store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch) -> Table:
    """One file of `GROUPS` row groups (about 0.7 MiB each decoded), decoded in pieces of a
    tenth of a row group, rewritten one file at a time; the encoder's buffer of pages made
    small beside a row group (it is 1 MiB)."""
    monkeypatch.setattr(base_stream, "DECODE_ROWS", GROUP_ROWS // 10)
    monkeypatch.setattr(slice_writer, "SINK_CHUNK", 4096)
    settings = TableSettings(local_entry_cache=False, parquet_row_group_rows=GROUP_ROWS,
                             small_file_limit=0, write_parallelism=1)  # fmt: skip
    t = Table.create(local_store, PROPS, settings)
    t.insert(_rows(np.arange(ROWS), 1))
    return t


@pytest.fixture
def counted_pool() -> Iterator[pa.MemoryPool]:
    """Arrow's default pool while the test runs, with counts of its own (`max_memory`)."""
    default = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(default)
    pa.set_memory_pool(pool)
    try:
        yield pool
    finally:
        pa.set_memory_pool(default)
        gc.collect()
        if pool.bytes_allocated():
            _HELD_POOLS.append(pool)


def _one_row_group_bytes(t: Table) -> int:
    (f,) = t.snapshot().files
    body = t.store.get(f.path)
    assert pq.read_metadata(pa.BufferReader(body)).num_row_groups == GROUPS
    return int(pq.ParquetFile(pa.BufferReader(body)).read_row_group(0).nbytes)


@pytest.mark.parametrize("ranged", [False, True], ids=["fetched-whole", "read-in-ranges"])
def test_a_delete_holds_about_one_row_group_decoded(
    table: Table, request: pytest.FixtureRequest, ranged: bool
) -> None:
    if ranged:
        request.getfixturevalue("ranged_reads")
    group_bytes = _one_row_group_bytes(table)
    gone = np.arange(5, ROWS, 97)  # a few rows out of every row group
    pool = request.getfixturevalue("counted_pool")
    table.delete(pa.table({"id": pa.array(gone, pa.int64())}))
    peak = pool.max_memory()
    # A row group gathered for the encoder, its encoded pages (these bytes do not compress),
    # a piece being decoded and the deleted keys; decoding a row group whole and filtering
    # it, then gathering the next one, held about four.
    assert peak <= 2.5 * group_bytes, (peak, group_bytes)
    got = table.read(columns=["id"]).column("id").to_numpy()
    assert got.tolist() == np.setdiff1d(np.arange(ROWS), gone).tolist()  # in the file's order


def test_an_upsert_holds_about_one_row_group_decoded(
    table: Table, request: pytest.FixtureRequest
) -> None:
    group_bytes = _one_row_group_bytes(table)
    changed = _rows(np.arange(3, ROWS, 101), 2)
    pool = request.getfixturevalue("counted_pool")
    table.upsert(changed)
    peak = pool.max_memory() - changed.nbytes
    assert peak <= 2.5 * group_bytes, (peak, group_bytes)
    got = table.read(columns=["id", "ts"])
    updated = changed.column("id").to_numpy()
    kept = np.setdiff1d(np.arange(ROWS), updated)
    # The rows kept in the base file's order, then the updated records.
    assert got.column("id").to_numpy().tolist() == [*kept.tolist(), *updated.tolist()]
    assert sum(got.column("ts").to_pylist()) == ROWS + len(changed)


@pytest.mark.parametrize("ranged", [False, True], ids=["fetched-whole", "read-in-ranges"])
def test_a_delete_whose_base_file_is_damaged_is_refused_by_name(
    table: Table, request: pytest.FixtureRequest, ranged: bool
) -> None:
    if ranged:
        request.getfixturevalue("ranged_reads")
    (f,) = table.snapshot().files
    store = table.store
    assert isinstance(store, LocalObjectStore)
    path = store.root / f.path
    body = bytearray(path.read_bytes())
    body[len(body) // 2] ^= 0x01  # one bit of a row group's data
    path.write_bytes(bytes(body))
    before = list(table.timeline().completed())
    with pytest.raises(IntegrityError, match=f"{f.path}.*corrupt"):
        table.delete(pa.table({"id": pa.array([5, ROWS // 2], pa.int64())}))
    assert list(table.timeline().completed()) == before
    assert table.snapshot().files == (f,)
