"""A small filesystem to run the CLI on until it is full.

Preferred: a real tmpfs of a few MiB mounted for the test (needs root and a kernel that lets
the test mount; the caller unmounts it). Where mounting is impossible, the CLI runs with its
local backend's temp-file writes limited to the same number of free bytes: past them a write
stores what fits and raises ENOSPC, as the kernel does. Every write of the local backend goes
through a temp file, so both ways exercise the same failure paths.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

SIZE = 4 * 1024 * 1024

# The CLI with the local backend's temp files limited to FLOWLEDGER_TEST_FREE_BYTES bytes.
_LIMITED_CLI = r"""
import builtins, errno, os, sys
import storage.local as local

free = [int(os.environ["FLOWLEDGER_TEST_FREE_BYTES"])]

class _Limited:
    def __init__(self, fh):
        self._fh = fh

    def write(self, data):
        n = memoryview(data).nbytes
        if n > free[0]:
            with memoryview(data) as view, view.cast("B")[: free[0]] as part:
                self._fh.write(part)
            free[0] = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        free[0] -= n
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

def _open(file, mode="r", *args, **kw):
    fh = builtins.open(file, mode, *args, **kw)
    return _Limited(fh) if "w" in mode and local.TMP_DIR in str(file) else fh

local.open = _open
sys.argv[0] = "flowledger"
from flowledger.cli import main
main()
"""


def mount_tmpfs(where: Path, size: int = SIZE) -> bool:
    """Mount a tmpfs of `size` bytes on `where`; False if this machine does not allow it."""
    if os.environ.get("FLOWLEDGER_TEST_NO_MOUNT") or not hasattr(os, "geteuid"):
        return False
    if os.geteuid() != 0:
        return False
    cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
    try:
        res = subprocess.run(cmd, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def unmount(where: Path) -> None:
    res = subprocess.run(["umount", str(where)], capture_output=True, timeout=30)
    if res.returncode != 0:  # something still holds it open: detach it at least
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


class SmallDisk:
    """`root` is a folder on a filesystem the test controls; `cli` runs flowledger with
    `free` bytes left on it (None: as much as there is)."""

    def __init__(self, root: Path, mounted: bool, env: dict[str, str]) -> None:
        self.root = root
        self.mounted = mounted
        self.env = env
        self._filler = root / "filler"

    def cli(
        self, *args: str, free: int | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if not self.mounted and free is not None:
            env["FLOWLEDGER_TEST_FREE_BYTES"] = str(free)
            cmd = [sys.executable, "-c", _LIMITED_CLI, *args]
        else:
            cmd = [sys.executable, "-m", "flowledger", *args]
        if self.mounted and free is not None:
            self._fill(free)
        try:
            # A process that hangs fails the test through the timeout (it is killed).
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        finally:
            self._filler.unlink(missing_ok=True)

    def _fill(self, free: int) -> None:
        """Take all the space but `free` bytes (to the page: tmpfs counts whole pages)."""
        st = os.statvfs(self.root)
        want = max(0, st.f_bavail * st.f_frsize - free)
        block = b"\0" * (64 * 1024)
        try:
            with open(self._filler, "wb") as fh:
                while want > 0:
                    fh.write(block[: min(want, len(block))])
                    want -= min(want, len(block))
        except OSError as exc:  # tmpfs rounds to pages: full a little early is full
            if exc.errno != errno.ENOSPC:
                raise
