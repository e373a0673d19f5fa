"""Append-only logs: many small durable writes into one file, one `fdatasync` each.

A durable write of a new object on a local filesystem costs a temp file, its fsync, a link and
a folder fsync (two filesystem journal commits). Appending to a file whose blocks were already
written (zero-filled ahead) and calling `fdatasync` changes no metadata, so it costs one data
flush. Backends that can append offer a log (`ObjectStore.open_append_log`); object stores
cannot append and keep one object per write.

Each block is framed: a 32-byte header (magic, payload length, payload CRC-32, a caller's tag
of two 64-bit integers, header CRC-32), then the payload. A writer appends one block at a time
and returns only after its `fdatasync`, so at most the last block can be incomplete after a
crash. Reading stops at the first block that is not whole (a zero header: the zero-filled
space ahead; a torn header or payload): that is the torn tail, never acknowledged. A block
that fails its checksum although a valid block follows it is damage in the middle: an
`IntegrityError` naming the object and the offset.

One writer per log: it holds an exclusive `flock` on the file as long as it appends, so a log
is deleted (`delete_idle`) only when no live writer holds it (the lock goes with the process).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import IntegrityError, RangeNotSatisfiable, StorageError, translate_os

MAGIC = b"FLB1"
_HEAD = struct.Struct("<4sIIQQ")  # magic, payload length, payload crc, tag first, tag second
_HEAD_CRC = struct.Struct("<I")
HEADER_SIZE = _HEAD.size + _HEAD_CRC.size
_ZERO = bytes(HEADER_SIZE)
#: Zero-filled ahead of the writer in steps of this many bytes (one metadata change per step).
PREALLOCATE = 4 << 20

Tag = tuple[int, int]


@dataclass(frozen=True)
class LogBlock:
    """A whole block: its header starts at `offset`; `length` payload bytes follow it."""

    offset: int
    length: int
    tag: Tag

    @property
    def payload_offset(self) -> int:
        return self.offset + HEADER_SIZE

    @property
    def end(self) -> int:
        return self.offset + HEADER_SIZE + self.length


def frame(payload: bytes | memoryview, tag: Tag) -> bytes:
    head = _HEAD.pack(MAGIC, len(payload), zlib.crc32(payload), tag[0], tag[1])
    return head + _HEAD_CRC.pack(zlib.crc32(head)) + bytes(payload)


def _header(data: bytes) -> tuple[int, int, Tag] | None:
    """(length, payload crc, tag) of a whole, valid header, else None."""
    if len(data) < HEADER_SIZE:
        return None
    head = data[: _HEAD.size]
    (crc,) = _HEAD_CRC.unpack_from(data, _HEAD.size)
    magic, length, payload_crc, a, b = _HEAD.unpack(head)
    if magic != MAGIC or zlib.crc32(head) != crc:
        return None
    return length, payload_crc, (a, b)


Reader = Callable[[int, int], bytes]


def scan_log(read: Reader, where: str, start: int = 0) -> tuple[list[LogBlock], int]:
    """The whole blocks from `start` on, and the offset where the valid prefix ends (the next
    block goes there). `read(offset, length)` returns fewer bytes at the end of the file."""
    blocks: list[LogBlock] = []
    at = start
    while True:
        head = read(at, HEADER_SIZE)
        if len(head) < HEADER_SIZE or head == _ZERO:
            return blocks, at
        parsed = _header(head)
        if parsed is None:
            return blocks, at  # a torn header: the tail
        length, crc, tag = parsed
        payload = read(at + HEADER_SIZE, length)
        if len(payload) < length or zlib.crc32(payload) != crc:
            # A torn payload is the last block; a damaged one has the log going on after it.
            if len(payload) == length and _header(read(at + HEADER_SIZE + length, HEADER_SIZE)):
                raise IntegrityError(
                    f"{where} is corrupt: the block at offset {at} fails its checksum "
                    "(valid blocks follow it)",
                    where,
                )
            return blocks, at
        blocks.append(LogBlock(at, length, tag))
        at += HEADER_SIZE + length


def read_log_block(read: Reader, where: str, block: LogBlock) -> bytes:
    """A block's payload, verified against its header (IntegrityError naming object+offset)."""
    data = read(block.offset, HEADER_SIZE + block.length)
    parsed = _header(data)
    payload = data[HEADER_SIZE:]
    if (
        parsed is None
        or parsed[0] != block.length
        or parsed[2] != block.tag
        or len(payload) != block.length
        or zlib.crc32(payload) != parsed[1]
    ):
        raise IntegrityError(
            f"{where} is corrupt: the block at offset {block.offset} fails its checksum", where
        )
    return payload


def log_reader(get: Callable[[int, int], bytes]) -> Reader:
    """A Reader over a store's ranged get: a range past the end reads as no bytes."""

    def read(offset: int, length: int) -> bytes:
        try:
            return get(offset, length)
        except RangeNotSatisfiable:
            return b""

    return read


class AppendLog:
    """A writer's log on the local filesystem (created by `LocalObjectStore.open_append_log`).

    `append` is thread-safe and sequential: a block is written and made durable before the
    next one starts, so only the last block of a log can ever be torn."""

    def __init__(self, path: Path, key: str, url: str, fsync: bool = True) -> None:
        self.key = key
        self.url = url
        self._path = path
        self._fsync = fsync
        self._lock = threading.Lock()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._fd: int | None = fd
            self.end = 0
            self._allocated = 0
            self._grow(PREALLOCATE)
            if fsync:
                os.fsync(fd)  # the file's existence and size, once
                _sync_dir(path.parent)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise

    def _grow(self, upto: int) -> None:
        """Zero-fill ahead, so that appends rewrite allocated blocks (no metadata changes)."""
        assert self._fd is not None
        target = max(upto, self._allocated + PREALLOCATE)
        os.pwrite(self._fd, bytes(target - self._allocated), self._allocated)
        self._allocated = target

    def append(self, payload: bytes | memoryview, tag: Tag) -> LogBlock:
        """Write one block and return once it is durable (one `fdatasync`). A failure leaves
        the log unusable (`closed`): the caller writes the block again into a new log, and
        readers take two blocks with one tag for one (the same bytes)."""
        data = frame(payload, tag)
        with self._lock:
            if self._fd is None:
                raise StorageError(f"append to {self.url}: the log is closed", self.url)
            at = self.end
            try:
                if at + len(data) > self._allocated:
                    self._grow(at + len(data))
                os.pwrite(self._fd, data, at)
                if self._fsync:
                    os.fdatasync(self._fd)
            except OSError as exc:
                self._close()
                raise translate_os(exc, self.url, "append", str(self._path.parent)) from exc
            except BaseException:
                self._close()
                raise
            self.end = at + len(data)
            return LogBlock(at, len(data) - HEADER_SIZE, tag)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        """Stop appending; the lock goes, so the log can be deleted once merged."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # releases the flock


def delete_idle(path: Path) -> bool:
    """Delete the log at `path` unless a writer holds it; True if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live writer appends to it
        # Holding the lock: no writer can take the log again (writers only create new logs).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return True
    finally:
        os.close(fd)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
