"""The tool cache under ~/.cache/flowledger (stdlib only): a lock for filling it, and jars
from Maven Central through the machine's Maven client. Its root is `flowledger.toolcache`'s
(the one copy, shipped with the package).

A Maven resolution fills one target folder: under a file lock, into a staging folder renamed
into place, marked complete last, so concurrent or interrupted fetches never leave a
half-filled cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

from flowledger.toolcache import cache_root

__all__ = ["MavenFetchError", "cache_root", "fetch_maven", "file_lock"]


class MavenFetchError(RuntimeError):
    """Maven is missing or could not resolve the artifacts."""


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created with its folder), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch_maven(
    pom: Path,
    target: Path,
    properties: Mapping[str, str],
    what: str,
    *,
    transitive: bool = True,
) -> Path:
    """`mvn dependency:copy-dependencies` of `pom` into `target` (idempotent); returns it."""
    done = target / ".complete"
    if done.exists():
        return target
    if shutil.which("mvn") is None:
        raise MavenFetchError(f"Maven (`mvn`) is needed to fetch {what}; install maven")
    with file_lock(target.parent / ".lock"):
        if done.exists():
            return target
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        cmd = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies"]
        cmd += ["-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
        if not transitive:
            cmd.append("-DexcludeTransitive=true")
        cmd += [f"-D{k}={v}" for k, v in properties.items()]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr)[-2000:]
            raise MavenFetchError(f"mvn could not resolve {what}:\n{tail}")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        done.touch()
    return target
