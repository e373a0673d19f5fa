"""Read-only, seekable file objects over byte ranges of one object, for readers (pyarrow's
Parquet reader) that seek and read a file but should see only some of its bytes.

`RangedFile` is the shape: a size, a position, `seek`/`tell`, and reads served by
`bytes_at(start, length)`, which a subclass answers (from a cache, by a ranged GET, from
what a caller fetched). `FetchedRanges` answers from the pieces a caller fetched and holds;
a read of bytes it was not given is refused rather than fetched behind the caller's back.
"""

from __future__ import annotations

import io


class RangedFile(io.RawIOBase):
    """A read-only seekable file of `size` bytes whose reads `bytes_at` serves."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size
        self._pos = 0

    @property
    def size(self) -> int:
        return self._size

    def bytes_at(self, start: int, length: int) -> bytes:
        """Bytes [start, start+length) of the file (`length` > 0, within the file)."""
        raise NotImplementedError

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        """Up to `size` bytes from the position (all that is left for None or < 0), served
        as `bytes_at` returns them (no copy into a buffer first, as `readinto` would)."""
        left = self._size - self._pos
        n = left if size is None or size < 0 else min(size, left)
        if n <= 0:
            return b""
        data = self.bytes_at(self._pos, n)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class FetchedRanges(RangedFile):
    """The file as far as it was fetched: the pieces held now (`hold`) and the ones `kept`
    throughout (e.g. the footer's tail), each at its offset in the file. A read must fall
    within one piece; a read of bytes not fetched raises ValueError."""

    def __init__(self, size: int, kept: list[tuple[int, bytes]] | None = None) -> None:
        super().__init__(size)
        self._kept = kept or []
        self._pieces: list[tuple[int, bytes]] = []

    def hold(self, pieces: list[tuple[int, bytes]]) -> None:
        """Hold these (offset, bytes) pieces instead of the ones held before."""
        self._pieces = pieces

    def bytes_at(self, start: int, length: int) -> bytes:
        end = start + length
        for offset, data in (*self._pieces, *self._kept):
            if offset <= start and end <= offset + len(data):
                return data[start - offset : end - offset]
        raise ValueError(f"bytes [{start}, {end}) of the file were not fetched")


__all__ = ["FetchedRanges", "RangedFile"]
