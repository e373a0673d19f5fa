"""A streamed insert keeps one upload open per partition; on S3 the parts those uploads hold
in memory stay within the store's `fast_upload_buffer_memory` however many partitions the
stream spreads over, and what went to disk is gone once the commit is done."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from storage import S3ObjectStore, open_store
from timeline import Table, TableSettings
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


@pytest.mark.minio
@pytest.mark.timeout(300)
def test_a_streamed_insert_into_many_partitions_holds_parts_within_the_budget(
    minio: Any, tmp_path: Path
) -> None:
    spill = tmp_path / "buffers"
    settings = minio.settings(
        multipart_size=5 * MiB, fast_upload_buffer_memory=16 * MiB, buffer_dir=str(spill)
    )
    store = open_store(f"s3://{minio.new_bucket()}/t", settings)
    assert isinstance(store, S3ObjectStore)
    try:
        t = Table.create(
            store, PROPS, TableSettings(local_entry_cache=False, parquet_row_group_rows=1_000)
        )
        spilled: list[int] = []

        def source() -> Iterator[pa.RecordBatch]:
            for b in _batches(80_000, 10_000):  # 8 MiB per partition, 10 uploads open
                spilled.append(len(_open_files(spill)))
                yield b

        t.insert(source())
        budget = store.upload_budget
        # Ten open uploads with 5 MiB parts would hold 50 MiB and more in memory.
        assert 5 * MiB < budget.most <= 16 * MiB
        assert max(spilled) >= 1, "parts past the budget waited on disk"
        assert budget.held == 0 and _open_files(spill) == []
        assert t.read(columns=["id"]).num_rows == 80_000
    finally:
        store.close()


@pytest.mark.minio
@pytest.mark.timeout(300)
def test_a_streamed_insert_keeps_its_parts_within_its_own_buffer_limit(
    minio: Any, tmp_path: Path
) -> None:
    # The store would hold 64 MiB of parts; the stream's `write_buffer_limit_bytes` (16 MiB,
    # about 10 MiB of it the batch in hand) leaves its uploads a few MiB: the rest of the
    # ten uploads' parts (about 50 MiB at 5 MiB each) waits on disk.
    spill = tmp_path / "buffers"
    limit = 16 * MiB
    settings = minio.settings(
        multipart_size=5 * MiB, fast_upload_buffer_memory=64 * MiB, buffer_dir=str(spill)
    )
    store = open_store(f"s3://{minio.new_bucket()}/t", settings)
    assert isinstance(store, S3ObjectStore)
    try:
        t = Table.create(
            store,
            PROPS,
            TableSettings(
                local_entry_cache=False, parquet_row_group_rows=1_000,
                write_buffer_limit_bytes=limit,
            ),
        )  # fmt: skip
        spilled: list[int] = []

        def source() -> Iterator[pa.RecordBatch]:
            for b in _batches(80_000, 10_000):
                spilled.append(len(_open_files(spill)))
                yield b

        done = t.insert(source())
        budget = store.upload_budget
        assert 0 < budget.most <= limit - 8 * MiB  # what the 10 MiB batches leave
        assert max(spilled) >= 1, "parts past the stream's limit waited on disk"
        assert budget.held == 0 and _open_files(spill) == []
        assert t.entry(done.time).metadata["keyed"]["stream"]["batches"] == 8
        ids = t.read(columns=["id"]).column("id").to_numpy()
        assert np.array_equal(np.sort(ids), np.arange(80_000))
    finally:
        store.close()
