"""What a writer hands back to the operating system after a commit: the C heap's freed pages
(glibc's `malloc_trim`), and blocks the size of a table's files, mapped on their own so
that freeing them unmaps them (a fixed `M_MMAP_THRESHOLD`)."""

from __future__ import annotations

import os

import pytest

from timeline.parquet_io import MMAP_THRESHOLD, release_unused_memory, return_large_blocks

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(
        not os.path.exists("/proc/self/statm") or os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        reason="glibc on Linux, threshold not set by the environment",
    ),
]

MiB = 1024 * 1024


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_freed_heap_pages_are_returned_after_a_commit() -> None:
    """Small blocks freed in the middle of the heap stay resident until trimmed."""
    blocks = [b"x" * (64 * 1024) for _ in range(1600)]  # 100 MiB of heap blocks
    pin = b"y" * (64 * 1024)  # above them: the heap cannot shrink from its top
    del blocks
    before = _rss()
    release_unused_memory()
    assert before - _rss() > 50 * MiB
    del pin


def test_blocks_the_size_of_a_file_go_back_when_freed() -> None:
    """After the first big block freed, glibc's dynamic threshold would put blocks of a few
    MiB into the heap, where freeing them leaves them resident; with the fixed threshold
    they are unmapped as they are freed."""
    return_large_blocks()
    first = b"x" * (32 * MiB)  # as a fetched file: freed, it raised the dynamic threshold
    del first
    big, pins = [], []
    for _ in range(25):
        big.append(b"x" * (4 * MiB))
        pins.append(b"y" * 1024)  # between them, so the heap cannot shrink from its top
    assert 4 * MiB >= MMAP_THRESHOLD
    before = _rss()
    del big
    assert before - _rss() > 80 * MiB  # no trim asked: unmapped as freed
    del pins
