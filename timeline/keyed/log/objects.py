"""Log objects: the log blocks one delta commit writes into one partition, packed into one
immutable object, so a delta commit PUTs one object per partition it touches (not one per
file group) and a full snapshot GETs each object once.

An object is written as one Arrow IPC stream whose record batches are its blocks (format 4,
keyed/log/stream.py). Objects of format 3 are their blocks back to back, each a sealed block
of keyed/log/block.py (its own checksum trailer and header), and are still read; the writer
falls back to it only for blocks whose columns differ. The commit records, per block, its
offset and size in the object and its checksum, and the whole object's size and checksum:

- a reader of one file group (a compaction, an incremental read of a few groups) GETs the
  block's byte range (of a stream object: also the stream's head) and verifies the block's
  checksum before decoding it;
- a reader of many groups GETs the object once, verifies the object's checksum, and then
  decodes the blocks it wants (of a stream object: as one stream).

A retried write PUTs the same bytes under the same key (encoding is deterministic), and a
block recorded twice is read once (`logs_of` keeps one block per id). Objects written as one
block per file group (no offset recorded) are read as before.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import IntegrityError, ObjectStore, checksum_of, verify

from ...errors import committed_object
from ...file_groups.log_files import LogFile
from .block import decode_log, encode_block, read_log
from .heads import Heads
from .implied import DELETE, OP_COL
from .stream import decode_object, encode_object, shares_schema


@dataclass(frozen=True)
class Block:
    """One file group's block of a delta commit (`encode`), before it is packed into an
    object with the other blocks of its partition."""

    file_group: str
    data: pa.Table  # its rows, with the op column
    deletes: int
    key_stats: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.data.num_rows)


def encode(
    rows: pa.Table,
    file_group: str,
    instant: str,
    *,
    key_stats: Mapping[str, Any] | None = None,
) -> Block:
    """One file group's block of a delta commit: `rows` with the op column."""
    deletes = int(pc.sum(pc.equal(rows.column(OP_COL), DELETE)).as_py() or 0)
    return Block(file_group, rows, deletes, dict(key_stats or {}))


def log_object_name(instant: str) -> str:
    """The name of a delta commit's log object in one partition (its data prefix and
    partition make the key unique; Hudi's log files are named by file group instead)."""
    return f".{instant}.log"


def write_log_object(
    store: ObjectStore,
    key: str,
    blocks: Sequence[Block],
    *,
    instant: str,
    partition: str,
    key_from: str | None = None,
    merge_by: str = "",
    ordered_deletes: bool = False,
) -> list[LogFile]:
    """PUT `blocks` (of distinct file groups) as one object: one stream whose batches are
    the blocks (format 4, keyed/log/stream.py), or, when their columns differ, the blocks
    sealed one by one, back to back (format 3); `key_from`: the table's single record key
    column; `merge_by`, `ordered_deletes`: their read-time merge rule (LogFile). Their log
    files, in order."""
    if shares_schema([b.data for b in blocks]):
        parts = [(b.file_group, b.data) for b in blocks]
        enc = encode_object(
            parts, instant, key_from=key_from, merge_by=merge_by, ordered_deletes=ordered_deletes
        )
        whole, head, placed = enc.body, enc.head, enc.blocks
    else:
        bodies = [
            encode_block(b.data, instant, b.file_group, 0, key_from, merge_by, ordered_deletes)
            for b in blocks
        ]
        whole, head = b"".join(bodies), 0
        starts = itertools.accumulate((len(x) for x in bodies), initial=0)
        placed = [(at, len(x), checksum_of(x)) for at, x in zip(starts, bodies, strict=False)]
    store.put(key, whole)
    total, summed = len(whole), checksum_of(whole)
    return [
        LogFile(
            key,
            b.file_group,
            partition,
            instant,
            0,
            size,
            b.rows,
            checksum,
            b.rows - b.deletes,
            b.deletes,
            merge_by,
            ordered_deletes and bool(merge_by),
            dict(b.key_stats),
            at,
            total,
            summed,
            head,
        )
        for b, (at, size, checksum) in zip(blocks, placed, strict=True)
    ]


def read_log_object(store: ObjectStore, path: str, logs: Sequence[LogFile]) -> dict[str, pa.Table]:
    """The blocks `logs` (all of the object `path`) by `LogFile.ref`, from one GET of the
    whole object: its checksum verified, then each block's before decoding."""
    where = store.url(path)
    with committed_object(where):
        data = store.get(path)
    first = logs[0]
    verify_object(data, first, where)
    if first.head:
        return decode_object(data, logs, where)
    view = memoryview(data)
    out = {}
    for lf in logs:
        assert lf.offset is not None
        out[lf.ref] = decode_log(view[lf.offset : lf.offset + lf.size], lf, where)
    return out


def verify_object(data: bytes, lf: LogFile, where: str) -> None:
    """The object's size and checksum as its commit recorded them."""
    if lf.object_size and len(data) != lf.object_size:
        raise IntegrityError(
            f"{where} is corrupt: {len(data)} bytes read, the commit recorded {lf.object_size}",
            where,
        )
    verify(data, lf.object_checksum, where)


def fetch_whole(logs: Sequence[LogFile]) -> dict[str, list[LogFile]]:
    """The objects a reader of `logs` GETs whole (path -> its blocks read): those holding
    several of them; the rest are read by range (or are one block each)."""
    by_path: dict[str, dict[str, LogFile]] = {}
    for lf in logs:
        if lf.offset is not None:
            by_path.setdefault(lf.path, {})[lf.ref] = lf
    return {p: list(b.values()) for p, b in by_path.items() if len(b) > 1}


class LogCache:
    """The log blocks of slices a reader is about to read one by one (a compaction's file
    groups, the candidates of keys a writer's index cannot place). With `whole` (they fit
    in memory), each log object holding several of the wanted blocks is fetched once,
    whole, and its wanted blocks decoded in one pass (of a format 4 object: as one stream,
    `read_log_object`); each block is then handed out once and let go, so the cache holds
    only the blocks still to be read. A block alone in its object, asked again, or read
    without `whole` is read by its range, and each object's head is fetched once for all
    of them (keyed/log/heads.py)."""

    def __init__(
        self, store: ObjectStore, wanted: Iterable[LogFile], *, whole: bool = True
    ) -> None:
        self.store = store
        self.whole = fetch_whole(list(wanted)) if whole else {}
        self.heads = Heads()
        self._blocks: dict[str, dict[str, pa.Table]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def read(self, lf: LogFile) -> pa.Table:
        """The block's rows, verified (read_log_object, block.read_log)."""
        if lf.path not in self.whole or lf.offset is None:
            if not lf.head or self.heads.get(self.store.url(lf.path), lf.object_checksum):
                return read_log(self.store, lf, self.heads)
            with self._lock_of(lf.path):  # the object's head fetched once, by the first
                return read_log(self.store, lf, self.heads)
        with self._lock_of(lf.path):  # one GET and one decoding per object, by the first
            blocks = self._blocks.get(lf.path)
            if blocks is None:
                blocks = read_log_object(self.store, lf.path, self.whole[lf.path])
                self._blocks[lf.path] = blocks
            rows = blocks.pop(lf.ref, None)
        return rows if rows is not None else read_log(self.store, lf, self.heads)

    def _lock_of(self, path: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(path, threading.Lock())
