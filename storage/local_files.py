"""File handles of the local backend that hold no store state: the bounded reader a ranged
`open_read` returns, and the clean-up of a temp file that will not be published."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO


def discard_tmp(fh: BinaryIO | None, tmp: Path) -> None:
    """Close and remove a temp file this process wrote and will not publish."""
    if fh is not None:
        with contextlib.suppress(OSError):
            fh.close()  # closes the descriptor even when the final flush fails
    with contextlib.suppress(OSError):
        os.unlink(tmp)


class LimitedReader:
    """A read-only view of the next `length` bytes of a file."""

    def __init__(self, fh: BinaryIO, length: int) -> None:
        self._fh = fh
        self._left = length

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._fh.read(n)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> LimitedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
