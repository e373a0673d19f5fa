"""Where a keyed write's new records go: small files of their partition first, then new file
groups. One rule for every writer (the copy-on-write writer, and an engine's driver placing
from per-partition counts).

Hudi's rule fills every latest slice below `small_file_limit` before starting a new file
group. Filling a file means rewriting it whole, so with Hudi's rule alone an append of 1 MiB
into a partition holding one 90 MiB file rewrites 90 MiB, and a table loaded over many
commits rewrites its partitions' files on every commit (quadratic in the commits). Here a
small file also has to be worth rewriting: it takes new records only while its size is at
most `small_file_rewrite_ratio` times the bytes routed into it, so a write rewrites at most
that many bytes of existing data per byte it adds. A file that takes records at least
doubles (ratio 1), so a file is rewritten for inserts O(log size) times. A file the write
rewrites anyway (it holds an updated or deleted key) costs nothing more to fill and takes
records up to the limit whatever its size.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ...layout import data_instant_time
from ...metadata import DataFile


def avg_record_size(files: Sequence[DataFile], default: int) -> int:
    rows = sum(f.rows for f in files)
    size = sum(f.size for f in files if f.rows)
    return max(1, size // rows) if rows else default


@dataclass(frozen=True)
class Fill:
    """`records` of a partition's new records go into the existing file group `group`."""

    group: str
    records: int


def fill_small_files(
    files: Sequence[DataFile],
    count: int,
    *,
    record_size: int,
    small_file_limit: int,
    rewrite_ratio: float,
    rewritten: Collection[str] = (),
) -> list[Fill]:
    """How many of `count` new records each of one partition's `files` (latest slices) takes:
    files the write rewrites anyway (`rewritten`, file groups; the newest first), then the
    smallest;
    each up to `small_file_limit` at its own average record size (`record_size` for a file
    without rows); a file not in `rewritten` only while its size is at most `rewrite_ratio`
    times the bytes it takes. What is left goes to new file groups (the caller's)."""
    under = [f for f in files if f.size < small_file_limit]
    # Rewritten groups newest first: new keys usually follow the newest ones (ids, times),
    # and joining the newest key range keeps older groups' ranges narrow for the index.
    small = sorted(
        (f for f in under if f.group in rewritten),
        key=lambda f: (data_instant_time(f.path) or "", f.path),
        reverse=True,
    ) + sorted((f for f in under if f.group not in rewritten), key=lambda f: (f.size, f.path))
    out: list[Fill] = []
    left = count
    for f in small:
        if left <= 0:
            break
        size = avg_record_size([f], record_size)
        room = (small_file_limit - f.size) // size
        if room <= 0:
            continue
        take = min(room, left)
        routed = take * (f.size / f.rows if f.rows else size)  # bytes, at the file's own rate
        if f.group not in rewritten and f.size > rewrite_ratio * routed:
            continue  # rewriting it would cost more than the records it takes are worth
        out.append(Fill(f.group, take))
        left -= take
    return out
