"""A streamed insert keeps one upload open per partition; on S3 the parts those uploads hold
in memory stay within the store's `fast_upload_buffer_memory` and within what the stream's
own `write_buffer_limit_bytes` leaves them, however many partitions the stream spreads over,
and what went to disk is gone once the commit is done."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from storage import S3ObjectStore, open_store
from timeline import Instant, Table, TableSettings
from timeline.keyed import KeyedProperties

MiB = 1024 * 1024
PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="part")
PARTS = 10


def _batches(rows: int, per_batch: int) -> Iterator[pa.RecordBatch]:
    """Rows spread over `PARTS` partitions with 1 KiB of random bytes each (incompressible:
    every partition's file passes one 5 MiB part)."""
    rng = np.random.default_rng(7)
    for lo in range(0, rows, per_batch):
        ids = np.arange(lo, lo + per_batch, dtype=np.int64)
        blob = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(1024), len(ids), [None, pa.py_buffer(rng.bytes(len(ids) * 1024))]
        )
        yield pa.record_batch(
            {
                "id": ids,
                "part": pa.array([f"p{i % PARTS}" for i in ids.tolist()]),
                "ts": np.ones(len(ids), dtype=np.int64),
                "blob": blob,
            }
        )


def _open_files(directory: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory) + "/"):
            found.append(target)
    return found


def _stream_into_s3(
    minio: Any, spill: Path, budget_bytes: int, **table: Any
) -> tuple[S3ObjectStore, Table, Instant, list[int]]:
    """A stream of 80,000 rows (8 MiB per partition, 10 uploads open, 5 MiB parts) inserted
    into a new table on MinIO; the store, the table, the commit and the spilled temp files
    counted before each batch."""
    settings = minio.settings(
        multipart_size=5 * MiB, fast_upload_buffer_memory=budget_bytes, buffer_dir=str(spill)
    )
    store = open_store(f"s3://{minio.new_bucket()}/t", settings)
    assert isinstance(store, S3ObjectStore)
    spilled: list[int] = []

    def source() -> Iterator[pa.RecordBatch]:
        for b in _batches(80_000, 10_000):
            spilled.append(len(_open_files(spill)))
            yield b

    try:
        settings_ = TableSettings(local_entry_cache=False, parquet_row_group_rows=1_000, **table)
        t = Table.create(store, PROPS, settings_)
        done = t.insert(source())
    except BaseException:
        store.close()
        raise
    return store, t, done, spilled


@pytest.mark.minio
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("budget_bytes", "buffer_limit", "least", "most"),
    [
        # Ten open uploads with 5 MiB parts would hold 50 MiB and more in memory: the
        # store's budget (16 MiB) bounds them.
        (16 * MiB, 128 * MiB, 5 * MiB, 16 * MiB),
        # The store would hold 64 MiB; the stream's `write_buffer_limit_bytes` (16 MiB,
        # about 10 MiB of it the batch in hand) leaves its uploads a few MiB.
        (64 * MiB, 16 * MiB, 1, 8 * MiB),
    ],
    ids=["store-budget", "stream-limit"],
)
def test_a_streamed_insert_into_many_partitions_holds_parts_within_its_bounds(
    minio: Any, tmp_path: Path, budget_bytes: int, buffer_limit: int, least: int, most: int
) -> None:
    spill = tmp_path / "buffers"
    store, t, done, spilled = _stream_into_s3(
        minio, spill, budget_bytes, write_buffer_limit_bytes=buffer_limit
    )
    try:
        budget = store.upload_budget
        assert least <= budget.most <= most
        assert max(spilled) >= 1, "the parts past the bound waited on disk"
        assert budget.held == 0 and _open_files(spill) == []
        assert t.entry(done.time).metadata["keyed"]["stream"]["batches"] == 8
        ids = t.read(columns=["id"]).column("id").to_numpy()
        assert np.array_equal(np.sort(ids), np.arange(80_000))
    finally:
        store.close()
