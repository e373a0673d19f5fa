"""Temp files of writers that died, removed by the next write into their folder.

A local write goes through a temp file under the repository root's temp folder (shared by every
scope of a store). A writer that dies leaves its temp file behind; it is never an object (no
committed object names it), so the first write of a later store into the same folder removes
those older than `multipart_purge_age` (a younger one may belong to a live writer).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def remove_stale(folder: Path, older_than: float) -> int:
    """Remove the files of `folder` last modified more than `older_than` seconds ago."""
    cutoff = time.time() - older_than
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        try:
            if entry.stat().st_mtime <= cutoff:
                os.unlink(entry.path)
                removed += 1
        except FileNotFoundError:
            continue  # published or aborted meanwhile
    return removed


class TempSweep:
    """Sweeps one temp folder once, before the first write of the store that owns it (and its
    scopes, which share it): later writes pay nothing."""

    def __init__(self, folder: Path, older_than: float) -> None:
        self.folder = folder
        self.older_than = older_than
        self._done = False
        self._lock = threading.Lock()

    def before_write(self) -> None:
        with self._lock:
            first, self._done = not self._done, True
        if first:
            remove_stale(self.folder, self.older_than)
