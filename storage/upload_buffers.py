"""Where a streaming upload holds a part until it is sent: in memory while the store's
upload buffers stay within one byte budget, else in a temp file (Hadoop s3a's
`fs.s3a.fast.upload.buffer`, with `disk` bounded by memory first).

A store has one budget, shared by all its uploads and those of its scoped views (a table's
store is a scoped view of the repository's): a process writing many objects at once (a
streamed insert keeps one upload per partition open) holds at most
`fast_upload_buffer_memory` bytes of parts in memory per store, however many uploads are
open. A block counts against the budget from its first byte until its part is sent (or the
upload is aborted); a block that would take the budget past its limit moves to disk and
stays there. An object under one part, written while the budget allows, never touches disk.

Temp files are anonymous (`tempfile.TemporaryFile`: on Linux opened with `O_TMPFILE`, or
unlinked at once): they disappear when the block is closed, on commit and abort alike, and
a process that dies leaves none behind.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal, TypeAlias

#: s3a `fs.s3a.fast.upload.buffer`: `disk` spills past the memory budget, `array` never does.
FastUploadBuffer: TypeAlias = Literal["disk", "array"]
#: A writer's own bound on the store's parts in memory, tighter than the budget's and asked
#: as each block fills: the most bytes they may hold at that moment (a caller with a memory
#: bound of its own, such as a streamed insert holding rows beside its uploads, hands one to
#: `open_writer`).
MemoryRoom: TypeAlias = Callable[[], int]


class MemoryBudget:
    """Bytes of upload blocks held in memory by a store's uploads (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = 0
        self._most = 0

    def take(self, n: int, limit: int | None) -> bool:
        """Count `n` more bytes held, unless that passes `limit` (None: no limit)."""
        with self._lock:
            if limit is not None and self._held + n > limit:
                return False
            self._held += n
            self._most = max(self._most, self._held)
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self._held -= n

    @property
    def held(self) -> int:
        return self._held

    @property
    def most(self) -> int:
        """The most bytes held at once since the last `reset_most`."""
        return self._most

    def reset_most(self) -> None:
        with self._lock:
            self._most = self._held


@dataclass(frozen=True)
class BufferPolicy:
    """How an upload buffers its blocks (from `StoreSettings`)."""

    kind: FastUploadBuffer
    memory: int  # the process-wide budget of bytes in memory (kind "disk")
    directory: str | None  # where spilled blocks go (None: the system temp directory)

    def __post_init__(self) -> None:
        if self.kind not in ("disk", "array"):
            raise ValueError(f"fast_upload_buffer must be 'disk' or 'array', not {self.kind!r}")
        if self.memory < 0:
            raise ValueError("fast_upload_buffer_memory must be >= 0")


class Block:
    """One part being filled: bytes in memory (counted against `budget`, within `room` when
    one is given) or a temp file."""

    def __init__(
        self, policy: BufferPolicy, budget: MemoryBudget, room: MemoryRoom | None = None
    ) -> None:
        self._policy = policy
        self._budget = budget
        self._room = room
        self._mem: bytearray | None = bytearray()
        self._file: IO[bytes] | None = None
        self._counted = 0  # bytes of `_mem` counted against the budget
        self.size = 0

    @property
    def on_disk(self) -> bool:
        return self._file is not None

    def write(self, data: memoryview) -> None:
        if self._mem is not None:
            limit = None if self._policy.kind == "array" else self._policy.memory
            if limit is not None and self._room is not None:
                limit = min(limit, self._room())
            if self._budget.take(len(data), limit):
                self._counted += len(data)
                self._mem += data
                self.size += len(data)
                return
            self._spill()
        assert self._file is not None
        self._file.write(data)
        self.size += len(data)

    def _spill(self) -> None:
        """Move the block's bytes to a temp file and give their memory back."""
        directory = self._policy.directory
        if directory:
            os.makedirs(directory, exist_ok=True)
        f = tempfile.TemporaryFile(dir=directory, prefix="flowledger-upload-")  # noqa: SIM115
        try:
            f.write(self._mem or b"")
        except BaseException:
            f.close()
            raise
        self._file, self._mem = f, None
        self._budget.give(self._counted)
        self._counted = 0

    def body(self) -> bytearray | IO[bytes]:
        """What to send: the bytes, or the temp file rewound (a retry calls this again)."""
        if self._file is not None:
            self._file.flush()
            self._file.seek(0)
            return self._file
        assert self._mem is not None
        return self._mem

    def read(self) -> bytes:
        """The block's bytes (an object under one part is sent with a single PUT)."""
        body = self.body()
        return bytes(body) if isinstance(body, bytearray) else body.read()

    def __del__(self) -> None:
        self.close()  # an upload dropped without commit or abort gives its bytes back too

    def close(self) -> None:
        """Give back the memory, or remove the temp file (idempotent)."""
        self._mem = None
        if self._counted:
            self._budget.give(self._counted)
            self._counted = 0
        if self._file is not None:
            f, self._file = self._file, None
            f.close()
