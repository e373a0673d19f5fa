"""Streaming uploads hold their parts in memory within one process-wide budget, past it in
anonymous temp files that are gone after commit and abort (storage/upload_buffers.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import S3ObjectStore, StorageError, StoreSettings, open_store
from storage.upload_buffers import Block, BufferPolicy, MemoryBudget
from tests.support.servers import S3Endpoint

MiB = 1024 * 1024


def spill_files(directory: Path) -> list[str]:
    """This process's open files under `directory` (anonymous temp files included: their
    link reads `directory/#inode (deleted)`)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(directory) + "/"):
                found.append(target)
    return found


@pytest.fixture
def s3(minio: S3Endpoint, tmp_path: Path) -> Iterator[tuple[S3ObjectStore, Path]]:
    """A store on a fresh MinIO bucket with 5 MiB parts, a 12 MiB budget and its own buffer
    directory."""
    spill = tmp_path / "buffers"
    settings = minio.settings(
        multipart_size=5 * MiB, fast_upload_buffer_memory=12 * MiB, buffer_dir=str(spill)
    )
    store = open_store(f"s3://{minio.new_bucket()}/t", settings)
    assert isinstance(store, S3ObjectStore)
    yield store, spill
    store.close()


def _chunk(i: int) -> bytes:
    return bytes([i % 251]) * (MiB // 2)


@pytest.mark.unit
def test_block_spills_past_the_budget_and_gives_its_bytes_back(tmp_path: Path) -> None:
    budget = MemoryBudget()
    policy = BufferPolicy("disk", 3 * MiB, str(tmp_path))
    a, b = Block(policy, budget), Block(policy, budget)
    a.write(memoryview(b"x" * (2 * MiB)))
    b.write(memoryview(b"y" * MiB))
    assert not a.on_disk and not b.on_disk and budget.held == 3 * MiB
    b.write(memoryview(b"z"))  # past the budget: b moves to disk with what it held
    assert b.on_disk and budget.held == 2 * MiB and len(spill_files(tmp_path)) == 1
    assert b.read() == b"y" * MiB + b"z" and b.size == MiB + 1
    b.close()
    a.close()
    assert budget.held == 0 and spill_files(tmp_path) == []
    array = Block(BufferPolicy("array", 0, str(tmp_path)), budget)
    array.write(memoryview(b"w" * MiB))  # `array` never spills
    assert not array.on_disk and budget.held == MiB
    del array  # dropped unclosed: its bytes are given back all the same
    assert budget.held == 0


@pytest.mark.unit
def test_a_writers_own_room_bounds_its_blocks_below_the_budget(tmp_path: Path) -> None:
    # The budget would hold 64 MiB; the writer's room (asked at each write) allows 2 MiB,
    # then none: its blocks go to disk past what the room allows at the moment.
    budget = MemoryBudget()
    room = [2 * MiB]
    policy = BufferPolicy("disk", 64 * MiB, str(tmp_path))
    a = Block(policy, budget, lambda: room[0])
    a.write(memoryview(b"x" * MiB))
    b = Block(policy, budget, lambda: room[0])
    b.write(memoryview(b"y" * MiB))
    assert not a.on_disk and not b.on_disk and budget.held == 2 * MiB
    b.write(memoryview(b"z"))  # past the room: b moves to disk
    assert b.on_disk and budget.held == MiB
    room[0] = 0
    c = Block(policy, budget, lambda: room[0])
    c.write(memoryview(b"w"))
    assert c.on_disk and budget.held == MiB
    assert a.read() == b"x" * MiB and b.read() == b"y" * MiB + b"z" and c.read() == b"w"
    for blk in (a, b, c):
        blk.close()
    assert budget.held == 0 and spill_files(tmp_path) == []
    unbounded = Block(BufferPolicy("array", 0, str(tmp_path)), budget, lambda: 0)
    unbounded.write(memoryview(b"v" * MiB))  # `array` never spills, whatever the room
    assert not unbounded.on_disk
    unbounded.close()


@pytest.mark.unit
def test_buffer_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="fast_upload_buffer"):
        StoreSettings(fast_upload_buffer="bytebuffer")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fast_upload_buffer_memory"):
        StoreSettings(fast_upload_buffer_memory=-1)


@pytest.mark.minio
def test_many_open_uploads_stay_within_the_memory_budget(s3: tuple[S3ObjectStore, Path]) -> None:
    """Twelve uploads open at once, written in turn as a streamed insert writes its
    partitions' files: the parts they hold in memory never pass the 12 MiB budget (60 MiB
    and more without it), the rest waits on disk, and every object is whole."""
    store, spill = s3
    budget = store.upload_budget
    writers = [store.scoped(f"p{i}").open_writer("file") for i in range(12)]  # one budget
    for step in range(24):  # 12 MiB per upload: two parts and a rest
        for i, w in enumerate(writers):
            w.write(_chunk(i + step))
    assert spill_files(spill), "parts past the budget are held on disk"
    for w in writers:
        w.commit()
    assert 6 * MiB < budget.most <= 12 * MiB
    assert budget.held == 0 and spill_files(spill) == []
    for i in range(12):
        assert store.get(f"p{i}/file") == b"".join(_chunk(i + s) for s in range(24))


@pytest.mark.minio
def test_a_small_object_within_the_budget_never_touches_disk(
    s3: tuple[S3ObjectStore, Path],
) -> None:
    store, spill = s3
    with store.open_writer("small") as w:
        w.write(b"s" * (4 * MiB))
        assert spill_files(spill) == [] and not spill.exists()
    assert store.get("small") == b"s" * (4 * MiB)


@pytest.mark.minio
def test_abort_removes_spilled_parts(s3: tuple[S3ObjectStore, Path]) -> None:
    store, spill = s3
    writers = [store.open_writer(f"a{i}") for i in range(4)]
    for step in range(16):
        for w in writers:
            w.write(_chunk(step))
    assert spill_files(spill)
    for w in writers:
        w.abort()
    assert store.upload_budget.held == 0 and spill_files(spill) == []
    assert not any(store.exists(f"a{i}") for i in range(4))


@pytest.mark.minio
def test_a_failed_part_upload_aborts_and_removes_spilled_parts(
    s3: tuple[S3ObjectStore, Path], minio: S3Endpoint
) -> None:
    """The multipart upload vanishes under the writer (as a lifecycle rule would remove it):
    its next parts fail, the commit raises, nothing lands and no buffer is left."""
    store, spill = s3
    hog = [store.open_writer(f"hog{i}") for i in range(3)]  # take the budget: parts spill
    for w in hog:
        w.write(b"h" * (4 * MiB))
    w = store.open_writer("victim")
    w.write(b"v" * (6 * MiB))  # the first part goes up
    client = minio.client()  # type: ignore[no-untyped-call]
    bucket = store.uri.split("/")[2]
    for up in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
        client.abort_multipart_upload(Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
    w.write(b"v" * (6 * MiB))  # parts sent to an upload that is gone
    assert spill_files(spill)
    with pytest.raises(StorageError):
        w.commit()
    for h in hog:
        h.abort()
    assert store.upload_budget.held == 0 and spill_files(spill) == []
    assert not store.exists("victim")
