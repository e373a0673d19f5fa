"""Append-only logs of the local backend: framed blocks read back, a torn tail ignored, damage in
the middle named by object and offset, and deletion refused while a writer holds the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from storage import (
    LOG_HEADER_SIZE,
    IntegrityError,
    LocalObjectStore,
    log_reader,
    read_log_block,
    scan_log,
)


def _read(store: LocalObjectStore, key: str) -> Callable[[int, int], bytes]:
    return log_reader(lambda offset, length: store.get(key, offset, length))


@pytest.mark.unit
def test_blocks_read_back_in_order_and_a_torn_tail_ends_the_log(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "repo")
    log = store.open_append_log("logs/a.flog")
    assert log is not None
    written = [log.append(bytes([i]) * (100 + i), (i * 10, i * 10 + 10)) for i in range(3)]
    blocks, end = scan_log(_read(store, "logs/a.flog"), "a", 0)
    assert blocks == written and end == written[-1].end
    assert read_log_block(_read(store, "logs/a.flog"), "a", blocks[1]) == bytes([1]) * 101
    # A later look reads on from where the valid prefix ended.
    more = log.append(b"x" * 50, (30, 40))
    assert scan_log(_read(store, "logs/a.flog"), "a", end) == ([more], more.end)
    log.close()
    path = tmp_path / "repo" / "logs" / "a.flog"
    with open(path, "r+b") as f:  # the last block torn: half its payload never reached disk
        f.truncate(more.offset + LOG_HEADER_SIZE + 20)
    assert scan_log(_read(store, "logs/a.flog"), "a", 0) == (written, written[-1].end)


@pytest.mark.unit
def test_a_damaged_block_with_blocks_after_it_names_object_and_offset(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "repo")
    log = store.open_append_log("logs/b.flog")
    assert log is not None
    blocks = [log.append(b"payload" * 20, (i, i + 1)) for i in range(3)]
    log.close()
    with open(tmp_path / "repo" / "logs" / "b.flog", "r+b") as f:
        f.seek(blocks[1].payload_offset + 3)
        f.write(b"?")
    damaged = rf"b is corrupt: the block at offset {blocks[1].offset}"
    with pytest.raises(IntegrityError, match=damaged):
        scan_log(_read(store, "logs/b.flog"), "b", 0)
    with pytest.raises(IntegrityError, match=rf"offset {blocks[1].offset}"):
        read_log_block(_read(store, "logs/b.flog"), "b", blocks[1])


@pytest.mark.unit
def test_a_log_is_deleted_only_when_no_writer_holds_it(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "repo")
    log = store.open_append_log("logs/c.flog")
    assert log is not None
    log.append(b"data", (0, 1))
    other = LocalObjectStore(tmp_path / "repo")  # another store, as another process would
    assert not other.delete_idle_log("logs/c.flog")
    assert store.exists("logs/c.flog")
    log.close()
    assert other.delete_idle_log("logs/c.flog")
    assert not store.exists("logs/c.flog")
    assert other.delete_idle_log("logs/c.flog")  # gone already: nothing to do
