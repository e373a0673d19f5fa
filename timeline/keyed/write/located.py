"""The bytes of small files a copy-on-write write located records in, kept for their rewrite
within a fixed budget.

The locate step fetches a file below `STREAM_MIN` whole (one GET) to read its keys; the
rewrite of the same file group then needs the whole file again. Keeping every located file
until its rewrite made a writer's peak grow with the files a write touches (and so with the
table); keeping none costs a second GET per rewritten small file. Here a located file's
bytes are kept while the bytes kept stay within `TableSettings.located_bytes_budget`, a
constant, and handed to its rewrite once: the peak it adds does not grow with the table,
and the GETs it saves are those of the first files that fit.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from ...metadata import DataFile


class LocatedBytes:
    """Verified bytes of committed files, by path, at most `budget` bytes in all. Locate
    tasks offer from several threads; each file is taken once, by its rewrite."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._held: dict[str, bytes] = {}
        self._used = 0
        self._lock = threading.Lock()
        self.taken = 0  # files handed to their rewrite (GETs saved)

    @property
    def used(self) -> int:
        """Bytes held now."""
        return self._used

    def offer(self, f: DataFile, body: bytes) -> bool:
        """Keep `f`'s bytes if they fit in what is left of the budget (a bigger file is not
        kept; smaller ones after it still may be)."""
        with self._lock:
            if f.path in self._held or self._used + len(body) > self.budget:
                return False
            self._held[f.path] = body
            self._used += len(body)
            return True

    def holds(self, f: DataFile | None) -> bool:
        """Whether `f`'s bytes are kept."""
        return f is not None and f.path in self._held

    def take(self, f: DataFile) -> bytes | None:
        """The bytes kept of `f`, handed over once (the caller holds them now), else None."""
        with self._lock:
            body = self._held.pop(f.path, None)
            if body is not None:
                self._used -= len(body)
                self.taken += 1
            return body

    def keep_only(self, paths: Collection[str]) -> None:
        """Drop what no rewrite will take (files located but not rewritten)."""
        with self._lock:
            for path in [p for p in self._held if p not in paths]:
                self._used -= len(self._held.pop(path))

    def clear(self) -> None:
        self.keep_only(())
