"""Completed entries on this machine's disk, so the next process does not GET them again.

A CLI commit is a fresh process: to check the new write's schema it reads the newest completed
commit, one GET, although the previous process on this machine wrote that very entry. A log
position never changes once taken (commit_log.py, guarantee 3), so an entry this machine
completed (`TimelineStore.write_completed`) may be kept for good; entries read from the bucket
are not written here (a reader would pay a file write per entry for a rare hit). Files are
named by table, log position, instant time and action, and an entry is used only for exactly
that instant, so a table deleted and written again at the same address cannot be answered from
an old file. Each file is the entry's checksummed JSON, as
in the bucket: a corrupt file is an `IntegrityError` here, dropped, and the GET is made instead.

The cache is best effort (a read-only home costs a GET, nothing else) and bounded: it keeps the
`KEEP` newest entries per table.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from storage import IntegrityError
from storage.cache_dir import cache_root, write_atomically

from .errors import TimelineError
from .instant import Instant
from .metadata import Entry

KEEP = 4
#: Overrides the folder (tests point it at a temporary one; "" turns the cache off).
ENV = "FLOWLEDGER_TIMELINE_CACHE"


class EntryCache:
    """The newest completed entries of one table (identified by its URL and endpoint)."""

    def __init__(self, identity: str, root: Path | None = None) -> None:
        override = os.environ.get(ENV)
        self.enabled = root is not None or override != ""
        if root is None:
            root = Path(override) if override else cache_root() / "timeline"
        digest = hashlib.sha256(identity.encode()).hexdigest()[:32]
        self.folder = root / digest

    def _path(self, seq: int, time: str, action: str) -> Path:
        return self.folder / f"{seq:012d}.{time}.{action}.json"

    def get(self, instant: Instant) -> Entry | None:
        if not self.enabled or instant.seq is None:
            return None
        path = self._path(instant.seq, instant.time, instant.action)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            e = Entry.decode(data, str(path))
        except (IntegrityError, TimelineError):
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        same = (e.seq, e.time, e.action) == (instant.seq, instant.time, instant.action)
        return e if same else None

    def put(self, e: Entry) -> None:
        """Keep `e` (it must be the log's entry at `e.seq`), then drop all but the newest."""
        if not self.enabled:
            return
        if write_atomically(self._path(e.seq, e.time, e.action), e.encode()):
            with contextlib.suppress(OSError):
                names = sorted(n for n in os.listdir(self.folder) if n.endswith(".json"))
                for old in names[:-KEEP]:
                    with contextlib.suppress(OSError):
                        (self.folder / old).unlink()


__all__ = ["KEEP", "EntryCache"]
