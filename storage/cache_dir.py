"""Where flowledger keeps small per-machine caches (capability answers, timeline entries):
`$FLOWLEDGER_CACHE`, else `~/.cache/flowledger` (the same root as flowledger.toolcache)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    override = os.environ.get("FLOWLEDGER_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "flowledger"


def write_atomically(path: Path, data: bytes) -> bool:
    """Best effort: a read-only or full home only costs the next process a request.
    Temp file + rename, so a reader never sees half a file."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return False


__all__ = ["cache_root", "write_atomically"]
