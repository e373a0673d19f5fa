"""A full local disk: every command fails at once with one line naming the folder, and leaves
the repository exactly as it was (no partial temp file, no half-written object).

The repository lives on a real tmpfs of 4 MiB mounted for the test where the machine allows
it; elsewhere the CLI's temp-file writes are limited to the same free space and fail with
ENOSPC past it (tests/support/small_disk.py). Temp files of writers that died are removed by
the next write into their folder once they are old enough.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import storage.local
from storage import StorageFull, open_store
from storage.content import ContentRepository, ContentRepositoryError, ContentRepositorySettings
from storage.errors import translate_os
from tests.support.small_disk import SmallDisk, mount_tmpfs, unmount

pytestmark = pytest.mark.unit

MiB = 1024 * 1024


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    where = tmp_path / "disk"
    where.mkdir()
    mounted = mount_tmpfs(where)
    cache = str(tmp_path / "cache")  # caches stay off the small disk
    env = dict(os.environ, XDG_CACHE_HOME=cache, FLOWLEDGER_CACHE=cache)
    try:
        yield SmallDisk(where, mounted, env)
    finally:
        if mounted:
            unmount(where)


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def assert_names_full_folder(res: subprocess.CompletedProcess[str], folder: Path) -> None:
    assert res.returncode == 10, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "no space left" in lines[0], lines[0]
    assert f"holding {folder};" in lines[0], lines[0]  # the folder, not only an object


def events(n: int, pad: int = 0) -> str:
    return "".join(
        json.dumps(
            {
                "event_type": "SEND",
                "flowfile_uuid": f"ff-{i}",
                "component_id": "put",
                "component_type": "PutS3Object",
                "file_size": i,
                "transit_uri": "s3://b/k",
                "event_time": 1_700_000_000_000 + i,
                "details": os.urandom(pad).hex(),
            }
        )
        + "\n"
        for i in range(n)
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("size", "free"),
    [(1000, 0), (3 * MiB, 0), (3 * MiB, MiB)],
    ids=["packed-on-full-disk", "streamed-on-full-disk", "streamed-past-free-space"],
)
def test_content_put_fails_at_once_and_leaves_nothing(
    disk: SmallDisk, tmp_path: Path, size: int, free: int
) -> None:
    repo = disk.root / "repo"
    first = tmp_path / "first.bin"
    first.write_bytes(os.urandom(1000))
    ok = disk.cli("content", "put", str(first), "--repo", str(repo))
    assert ok.returncode == 0, ok.stderr
    before = files(repo)
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(size))
    # A streamed content used to wait forever in the rollback for its failed writer.
    res = disk.cli("content", "put", str(src), "--repo", str(repo), free=free, timeout=60)
    assert res.returncode == 10, res.stderr
    assert files(repo) == before
    assert_names_full_folder(res, repo)
    back = tmp_path / "back.bin"
    got = disk.cli("content", "get", ok.stdout.strip(), "-o", str(back), "--repo", str(repo))
    assert got.returncode == 0, got.stderr
    assert back.read_bytes() == first.read_bytes()


@pytest.mark.timeout(300)
def test_table_write_on_a_full_disk_leaves_the_table_as_it_was(
    disk: SmallDisk, tmp_path: Path
) -> None:
    table = disk.root / "repo" / "tables" / "t"
    small = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "blob": [b"a", b"b", b"c"]}), small)
    ok = disk.cli("table", "write", str(table), str(small))
    assert ok.returncode == 0, ok.stderr
    before = files(disk.root / "repo")
    big = tmp_path / "big.parquet"  # ~3 MiB that do not compress
    n = 3000
    data = pa.table({"id": list(range(n)), "blob": [os.urandom(1024) for _ in range(n)]})
    pq.write_table(data, big, compression="none")
    res = disk.cli("table", "write", str(table), str(big), free=MiB)
    assert res.returncode == 10, res.stderr
    assert files(disk.root / "repo") == before  # nothing under tables/t/.flowledger-tmp
    assert_names_full_folder(res, table)  # a table opened by its URI: its own folder
    count = disk.cli("table", "read", str(table), "--count")
    assert count.returncode == 0, count.stderr
    assert count.stdout.strip() == "3"


@pytest.mark.timeout(300)
def test_provenance_ingest_on_a_full_disk_leaves_nothing(disk: SmallDisk, tmp_path: Path) -> None:
    repo = disk.root / "repo"
    small = tmp_path / "small.jsonl"
    small.write_text(events(10))
    ok = disk.cli("provenance", "ingest", str(small), "--repo", str(repo))
    assert ok.returncode == 0, ok.stderr
    # Merged now, or the next ingest would merge it first (a commit of its own).
    assert disk.cli("provenance", "rollover", "--repo", str(repo)).returncode == 0
    before = files(repo)
    big = tmp_path / "big.jsonl"  # ~3 MiB of events that do not compress
    big.write_text(events(6000, pad=256))
    res = disk.cli("provenance", "ingest", str(big), "--repo", str(repo), free=MiB)
    assert res.returncode == 10, res.stderr
    assert files(repo) == before
    assert_names_full_folder(res, repo)
    sql = "SELECT count(*) AS n FROM provenance"
    count = disk.cli("provenance", "sql", sql, "--repo", str(repo), "--json")
    assert count.returncode == 0, count.stderr
    assert json.loads(count.stdout) == [{"n": 10}]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "flowledger", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_stale_temp_files_go_with_the_next_write_into_their_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    table = repo / "tables" / "t"
    dead_t = table / ".flowledger-tmp" / "dead-writer"
    live_t = table / ".flowledger-tmp" / "live-writer"
    dead_r = repo / ".flowledger-tmp" / "dead-writer"
    old = time.time() - 3 * 24 * 3600  # older than multipart_purge_age (24 h)
    for path in (dead_t, live_t, dead_r):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 4096)
    for path in (dead_t, dead_r):
        os.utime(path, (old, old))
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [1]}), src)
    assert _cli("table", "write", str(table), str(src)).returncode == 0
    assert not dead_t.exists()
    assert live_t.exists()  # may be a writer still at work
    ingest = tmp_path / "e.jsonl"
    ingest.write_text(events(3))
    assert _cli("provenance", "ingest", str(ingest), "--repo", str(repo)).returncode == 0
    assert not dead_r.exists()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_full_disk_and_quota_name_the_folder_and_what_to_do(code: int) -> None:
    err = translate_os(OSError(code, os.strerror(code)), "file:///r/a/b", "put", "/r")
    assert isinstance(err, StorageFull)
    text = str(err)
    assert text.startswith("put file:///r/a/b: ")
    assert "holding /r;" in text
    assert "free space there" in text


@pytest.mark.timeout(60)  # a session left waiting for its writer hangs: the timeout fails it
@pytest.mark.parametrize("abort_raises", [False, True], ids=["abort-ok", "abort-raises"])
@pytest.mark.parametrize("fails_in", ["write", "commit"])
def test_a_failed_content_writer_always_releases_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails_in: str, abort_raises: bool
) -> None:
    full = StorageFull("put file:///r/x: no space left on the device holding /r", "file:///r/x")
    real_write = storage.local._LocalWriter.write
    real_abort = storage.local._LocalWriter.abort

    def write(self: storage.local._LocalWriter, data: bytes | bytearray | memoryview) -> int:
        if fails_in == "write":
            raise full
        return real_write(self, data)

    def finish_tmp(self: storage.local.LocalObjectStore, fh: object, durable: bool = True) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # the flush or the fsync

    def abort(self: storage.local._LocalWriter) -> None:
        real_abort(self)
        if abort_raises:
            raise RuntimeError("abort failed")

    repo = ContentRepository.open(
        open_store(str(tmp_path / "repo")), ContentRepositorySettings(archive_cleanup_frequency=0)
    )
    with monkeypatch.context() as patch:
        patch.setattr(storage.local._LocalWriter, "write", write)
        patch.setattr(storage.local._LocalWriter, "abort", abort)
        if fails_in == "commit":
            patch.setattr(storage.local.LocalObjectStore, "_finish_tmp", finish_tmp)
        with (
            pytest.raises((ContentRepositoryError, RuntimeError)),
            repo.transaction() as session,
            session.write() as w,
        ):
            w.write(b"a" * 512 * 1024)  # packed first, then past the threshold: own claim
            w.write(b"b" * 1024 * 1024)
    with repo.transaction() as session:  # the repository is usable: nothing waits
        claim = session.write_bytes(b"after")
    assert repo.read_bytes(claim) == b"after"
    repo.close()
    assert not any((tmp_path / "repo" / ".flowledger-tmp").iterdir())
